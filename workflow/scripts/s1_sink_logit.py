"""S1: run the sink-logit example and record its three numbers."""

from sinkscope import logs
from sinkscope.exhibits.s1 import measured_claims, sink_logit_example
from sinkscope.provenance import Recorder, write_parquet
from sinkscope.scorecard import measured_record, write_claims

smk = snakemake  # noqa: F821 (provided by Snakemake)
log = logs.setup(smk.log[0])
recorder = Recorder.from_snakemake(smk)
table = sink_logit_example(**smk.params.S1)
claims = measured_claims(table)
log.info("No sink: output norm %.2f", claims["S1.norm_without_sink"])
log.info(
    "With sink: sink takes %.0f %% of the weight, output norm %.2f",
    claims["S1.sink_share"],
    claims["S1.norm_with_sink"],
)
write_parquet(table, smk.output.table, recorder.record())
model = "6 random values (torch.manual_seed)"
write_claims(
    smk.output.claims,
    "S1",
    smk.params.scale,
    {cid: measured_record(v, model) for cid, v in claims.items()},
    recorder.record(),
)
