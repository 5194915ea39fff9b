"""Numbers identical across a pure restructure: a small, fully seeded audit (adult_fdp, 24 trials per game) and one
simulated one-run audit (1,000 canaries) compared with the results stored in tests/data/golden_numbers.json.

Everything results.json holds is compared except what changes from run to run or between machines (the creation
time, the command line, library versions, the data set's checksum) and the sentences written for people (an
explanation or a description may be reworded without changing a number). Integers, booleans and strings must be
equal; floats must agree to 1e-9 relative: a restructure that changes what is computed moves them far more, while
another CPU's vector kernels may move the last bits. A key the golden file lacks is allowed (a new field is an
addition, not a restructure); a missing or changed one fails.

To regenerate the golden file on purpose (a change that is meant to change numbers): ``FDP_AUDIT_REGENERATE_GOLDEN=1
python -m pytest tests/test_golden_numbers.py``, and say in the commit why the numbers changed.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

GOLDEN = Path(__file__).parent / "data" / "golden_numbers.json"
REGENERATE = os.environ.get("FDP_AUDIT_REGENERATE_GOLDEN") == "1"
VOLATILE = {"created", "command", "versions", "dataset_fingerprint", "explanation", "description"}
RELATIVE = 1e-9


def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(key): _stable(item) for key, item in value.items() if key not in VOLATILE}
    if isinstance(value, list | tuple):
        return [_stable(item) for item in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _differences(golden: Any, current: Any, where: str = "") -> list[str]:
    if isinstance(golden, dict):
        if not isinstance(current, dict):
            return [f"{where}: {type(current).__name__} where the golden file has a mapping"]
        return [line for key, item in golden.items()
                for line in (_differences(item, current[key], f"{where}/{key}") if key in current
                             else [f"{where}/{key}: missing"])]
    if isinstance(golden, list):
        if not isinstance(current, list) or len(current) != len(golden):
            return [f"{where}: {current!r:.80} where the golden file has a list of {len(golden)}"]
        return [line for i, (a, b) in enumerate(zip(golden, current, strict=True))
                for line in _differences(a, b, f"{where}/{i}")]
    if isinstance(golden, float) and isinstance(current, int | float) and not isinstance(current, bool):
        same = math.isclose(golden, current, rel_tol=RELATIVE, abs_tol=1e-300) or (math.isnan(golden)
                                                                                  and math.isnan(current))
        return [] if same else [f"{where}: {current!r} where the golden file has {golden!r}"]
    if type(golden) is not type(current) or golden != current:
        return [f"{where}: {current!r} where the golden file has {golden!r}"]
    return []


def _audit_numbers() -> dict[str, Any]:
    import fdp_audit

    return fdp_audit.audit("configs/adult_fdp.yaml", trials=24, seed=0).to_dict()


def _one_run_numbers() -> dict[str, Any]:
    from fdp_audit.auditing.one_run.evaluation import simulated_audit
    from fdp_audit.claim import Claim

    claim = Claim.stated("dp_sgd", 1.0, 0.05, 100, 1e-5).one_run_curve("add_remove")
    return simulated_audit(np.random.default_rng(7), 1000, "inclusion", 2, 1.0, 0.05, 100, claim, 0.05)


@pytest.mark.slow
def test_numbers_are_those_of_the_golden_file():
    """The audit's and the one-run simulation's results, key by key, against the stored ones."""
    current = json.loads(json.dumps(_stable({"audit": _audit_numbers(), "one_run_simulation": _one_run_numbers()})))
    if REGENERATE:
        GOLDEN.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        pytest.skip(f"regenerated {GOLDEN}")
    differences = _differences(json.loads(GOLDEN.read_text(encoding="utf-8")), current)
    assert not differences, f"{len(differences)} numbers differ from {GOLDEN.name}:\n" + "\n".join(differences[:40])


def test_the_comparison_catches_a_changed_number():
    """The comparison itself can fail: one count or one float changed in the last kept digit is reported."""
    golden = {"a": [1, 0.5, "x"], "b": {"c": 2.0}}
    assert _differences(golden, {"a": [1, 0.5, "x"], "b": {"c": 2.0}, "new": 1}) == []
    assert _differences(golden, {"a": [2, 0.5, "x"], "b": {"c": 2.0}}) == ["/a/0: 2 where the golden file has 1"]
    assert _differences(golden, {"a": [1, 0.5 * (1 + 1e-8), "x"], "b": {"c": 2.0}}) != []
    assert _differences(golden, {"a": [1, 0.5, "x"], "b": {}}) == ["/b/c: missing"]
