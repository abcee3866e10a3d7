"""S3 and S4: perplexity tables, log-PPL curves and claims from the per-token NLL tables."""

import pandas as pd

from sinkscope import logs
from sinkscope.exhibits import s3
from sinkscope.provenance import Recorder, write_parquet
from sinkscope.scorecard import measured_record, write_claims

smk = snakemake  # noqa: F821 (provided by Snakemake)
log = logs.setup(smk.log[0])
recorder = Recorder.from_snakemake(smk)
ppl = smk.params.ppl
nll = pd.concat([pd.read_parquet(path) for path in smk.input], ignore_index=True)
table = s3.s3_table(nll)
log.info("S3\n%s", table.to_string())
sinks_table = s3.s4_table(nll, ppl["cache"], ppl["sinks"])
log.info("S4\n%s", sinks_table.to_string())
write_parquet(table, smk.output.s3, recorder.record())
write_parquet(s3.curve(nll, ppl["bin_tokens"]), smk.output.curve, recorder.record())
write_parquet(sinks_table, smk.output.s4, recorder.record())
for exhibit, claims, path in (
    (
        "S3",
        s3.s3_claims(nll, ppl["claim_models"]["S3"], ppl["cache"], ppl["newline_sinks"]),
        smk.output.s3_claims,
    ),
    ("S4", s3.s4_claims(sinks_table, ppl["claim_models"]["S4"]), smk.output.s4_claims),
):
    model = ppl["claim_models"][exhibit]
    others = [m for m in ppl["models"] if m != model]
    note = f"cache {ppl['cache']}; other models in results/{exhibit}/ppl.parquet: {others}"
    if exhibit == "S3":
        scored = table[(table.model == model) & table.condition.str.startswith("recompute")]
        note += f"; re-computation scored at {int(scored.tokens.iloc[0])} positions"
    write_claims(
        path,
        exhibit,
        smk.params.scale,
        {cid: measured_record(v, model, note) for cid, v in claims.items()},
        recorder.record(),
    )
