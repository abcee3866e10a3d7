"""Vision (mitigation stage): ViT variants with registers and gated attention, trained with LeJEPA.

`variants` names the trained models (light, imported by the workflow), `images` generates the
procedural images with exact masks, `datasets` reads them or the paper-scale datasets, `models`
builds the ViT variants, `sigreg` and `augment` make the LeJEPA loss and its views, `lejepa`
trains, `probes` fits frozen linear probes and `norms` measures token norms (S8).
"""
