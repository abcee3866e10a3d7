"""Vision (mitigation stage): ViT variants with registers and gated attention, trained with LeJEPA.

`variants` names the trained models (light, imported by the workflow), `images` generates the
procedural images with exact masks, `datasets` reads them or the paper-scale datasets, `models`
configures the ViT variants (their architecture is `sinkscope.models.vit`), `sigreg` and
`augment` make the LeJEPA loss and its views, `lejepa` trains them in the shared loop of
`sinkscope.training`, `probes` fits frozen linear probes and `norms` measures token norms (S8).
"""
