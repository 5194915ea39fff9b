"""``make bench``: run B1–B6 (docs/training.md), B8 (docs/cluster.md), B9 (every command's fixed start cost,
docs/api.md) and B10 (the overhead of gradient canaries on the user's training, docs/one_run.md); print one JSON
line per benchmark record.

Each module ``benchmarks.<name>`` has ``run()`` returning a record or a list of records
(``{"name", "ours", "baseline", "ratio", "unit", "n", "spread"}`` and optional extras). A benchmark that
cannot be imported or fails prints a record with ``error`` and the others still run; the exit code is 1
if any did.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
import traceback

from benchmarks.timing import Record, error_record

BENCHMARKS = ("b1_step", "b2_batched", "b3_accounting", "b4_profiles", "b5_demo", "b6_modules", "b8_dask", "image_step",
              "image_batched", "b9_start", "b10_canary_overhead")


def _records(module_name: str) -> list[Record]:
    try:
        module = importlib.import_module(f"benchmarks.{module_name}")
        result = module.run()
    except Exception as error:  # one broken benchmark must not hide the others' results
        traceback.print_exc(file=sys.stderr)
        return [error_record(module_name, error)]
    return result if isinstance(result, list) else [result]


def main() -> int:
    failed = False
    for module_name in BENCHMARKS:
        start = time.perf_counter()
        for record in _records(module_name):
            failed = failed or "error" in record
            print(json.dumps(record), flush=True)
        print(f"# {module_name}: {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
