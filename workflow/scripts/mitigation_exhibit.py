"""U8, U9 or S8: the exhibit's tables and measured claims from the per-model results."""

import pandas as pd

from sinkscope import logs
from sinkscope.exhibits import s8, u8, u9
from sinkscope.provenance import Recorder, write_parquet
from sinkscope.scorecard import measured_record, write_claims

smk = snakemake  # noqa: F821 (provided by Snakemake)
log = logs.setup(smk.log[0])
recorder = Recorder.from_snakemake(smk)
exhibit, models = smk.params.exhibit, smk.params.models


def per_model(kind):
    """{model: table} of the inputs named <kind>_<index>, in the order of `models`."""
    names = list(models)
    return {
        names[int(k.split("_")[-1])]: pd.read_parquet(p)
        for k, p in smk.input.items()
        if k.rsplit("_", 1)[0] == kind
    }


def labelled(kind):
    """The per-model tables stacked, with each model's labels (variant, seed, pair, role)."""
    return pd.concat(
        [t.assign(model=m, **models[m]) for m, t in per_model(kind).items()], ignore_index=True
    )


if exhibit == "U8":
    probes = u8.stack(per_model("probes"), models)
    curves = u8.stack(per_model("curve"), models)
    table = u8.summary(probes, smk.params.variants)
    tables = {"table": table, "probes": probes, "curves": curves}
    measured = u8.claims(table)
elif exhibit == "U9":
    events = u9.events(per_model("heads"), models, smk.params.first_counted_layer)
    table = u9.summary(events, smk.params.variants)
    tables = {"table": table, "events": events}
    measured = u9.claims(table, events)
else:
    tokens = labelled("norms")
    shares = s8.shares(tokens, smk.params.outlier)
    tables = {
        "shares": shares,
        "histogram": s8.histogram(tokens, smk.params.bins),
        "maps": labelled("maps"),
    }
    measured = s8.claims(shares)
prov = recorder.record()
for name, table in tables.items():
    log.info(
        "%s %s:\n%s",
        exhibit,
        name,
        table.drop(columns=["pixels", "weights"], errors="ignore").head(60).to_string(),
    )
    write_parquet(table, smk.output[name], prov)
model = smk.params.claim_model
for claim, (value, note) in measured.items():
    log.info("%s = %s (%s)", claim, value, note)
write_claims(
    smk.output.claims,
    exhibit,
    smk.params.scale,
    {c: measured_record(v, model, n) for c, (v, n) in measured.items()},
    recorder.record(),
)
