"""The privacy claim a config states, as the ``mechanism`` section of ``results.json`` (docs/files.md): the
audit writes it, and the gate re-derives it from the stated config to refuse results whose section was edited."""

from __future__ import annotations

from typing import Any

from fdp_audit.config import Config
from fdp_audit.training.mechanisms import MECHANISMS
from fdp_audit.training.run import accountant, noise_multiplier


def mechanism_section(config: Config) -> dict[str, Any]:
    """The claimed mechanism: its name, description, z, p, T, C, δ and ε(δ); a third-party training function
    is described as the claim of the mechanism it names."""
    mech = config.mechanism
    info = MECHANISMS[mech.name]
    eps = float(accountant(mech).epsilon(mech.delta))
    if mech.third_party is not None or mech.training is not None:
        code = mech.third_party or f"{mech.training} on {config.model.factory}"
        return {"name": f"third-party {code}", "faulty": False,
                "description": f"A user-supplied training function, audited against the claim of {mech.name}: "
                               f"{info.description}", "claimed_as": mech.name,
                "noise_multiplier": noise_multiplier(mech), "sample_rate": mech.sample_rate, "steps": mech.steps,
                "clip_norm": mech.clip_norm, "delta": mech.delta, "epsilon": eps}
    return {"name": mech.name, "faulty": info.faulty, "description": info.description,
            "noise_multiplier": noise_multiplier(mech), "sample_rate": mech.sample_rate, "steps": mech.steps,
            "clip_norm": mech.clip_norm, "delta": mech.delta, "public_batch_size": mech.public_batch_size,
            "private_weight": mech.private_weight, "public_pretrain_steps": mech.public_pretrain_steps,
            "public_loss": mech.public_loss, "epsilon": eps}
