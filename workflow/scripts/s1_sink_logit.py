"""S1: run the sink-logit example and record its three numbers."""

from sinkscope import logs
from sinkscope.exhibits.s1 import measured_claims, sink_logit_example
from sinkscope.provenance import Recorder, write_json, write_parquet
from sinkscope.scorecard import measured_record

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
write_json(
    {
        "exhibit": "S1",
        "scale": smk.params.scale,
        "claims": {cid: measured_record(v, model) for cid, v in claims.items()},
    },
    smk.output.claims,
    recorder.record(),
)
