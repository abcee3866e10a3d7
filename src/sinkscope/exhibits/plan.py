"""What a merged config asks for (`Plan`): the models of each modality, the ViTs the vision
stage trains, the S8 pairs and any config value by its dotted key. The exhibit registry and the
workflow's rules read a config through it. Light on purpose (no torch at import).
"""

from __future__ import annotations

from typing import Any

from ..models.sources import null_of, parent_of
from ..vision.variants import trained_models

# the claim models of the diagnostics (`diagnostics.claim_models`), each measured against its null
CLAIM_ROLES = ("text", "bos", "image", "registers")


class Plan:
    """What a merged config asks for: the models of each modality, the ViTs the vision stage
    trains, and any config value by its dotted key."""

    def __init__(self, config: dict[str, Any]):
        self.config = config
        self.trained = trained_models(config["mitigation"])
        if clash := sorted(set(self.trained) & set(config["registry"])):
            raise ValueError(f"registry models {clash} have the names of trained ViTs; rename them")

    def get(self, key: str) -> Any:
        """The config value at a dotted key, e.g. `toys.U1` or `streaming.ppl.cache`."""
        value = self.config
        for part in key.split("."):
            value = value[part]
        return value

    def entry(self, model: str) -> dict[str, Any]:
        """A model's registry entry, or the description of a ViT the vision stage trains (a
        null: its parent's)."""
        model = parent_of(model)
        return self.trained[model] if model in self.trained else self.config["registry"][model]

    def nulls(self, roles: tuple[str, ...] = CLAIM_ROLES) -> list[str]:
        """The nulls (randomly initialised copies, `models.sources.null_of`) of the claim models
        of `roles` that this scale runs, in the order of the roles."""
        present = self.models_of()
        names = [self.get(f"diagnostics.claim_models.{role}") for role in roles]
        return list(dict.fromkeys(null_of(m) for m in names if m in present))

    def models_of(self, modality: str | None = None, registers: bool = False) -> list[str]:
        """The models of this scale (the registry's, then the seed-0 trained ViTs), optionally
        only those of a modality or with registers."""
        seed0 = [name for name, info in self.trained.items() if info["seed"] == 0]
        return [
            m
            for m in self.config["models"] + seed0
            if modality in (None, self.entry(m)["modality"])
            and (not registers or self.entry(m).get("registers", 0) > 0)
        ]

    def s8_pairs(self) -> dict[str, dict[str, Any]]:
        """{model: pair label, role (without / with registers), seed} of the S8 models (named
        pairs are models of the run: `config.cross_field_problems` checks it)."""
        settings = self.config["mitigation"]
        if settings["s8"]["pairs"]:
            return {
                m: {"pair": " / ".join(pair), "role": role, "seed": 0}
                for pair in settings["s8"]["pairs"]
                for m, role in zip(pair, ("without", "with"), strict=True)
            }
        found = {}
        for without, with_registers in (("baseline", "registers"), ("gate", "gate-registers")):
            for seed in range(settings["n_seeds"]):
                for variant, role in ((without, "without"), (with_registers, "with")):
                    found[f"vit-{variant}-s{seed}"] = {
                        "pair": f"{without} / {with_registers}",
                        "role": role,
                        "seed": seed,
                    }
        return found
