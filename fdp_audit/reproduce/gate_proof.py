"""``gate_proof``: every known-faulty mechanism of ``configs/faulty/`` audited, each expected to be a
VIOLATION (SPEC 2.6, 3; issue 7). The statistical guarantees of these verdicts are in
``tests/audit/test_gate_proof.py``; this entry regenerates the table for the README."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from fdp_audit.audit.results import write_results
from fdp_audit.audit.runner import run_audit
from fdp_audit.config import load_config
from fdp_audit.reproduce.common import Summary, markdown_table, write_reproduction

FAULTY = Path(__file__).parents[2] / "configs" / "faulty"
QUICK_TRIALS, QUICK_ROWS = 100, 2000


def run(out_dir: Path, quick: bool = False) -> Summary:
    rows, verdicts = [], {}
    for path in sorted(FAULTY.glob("*.yaml")):
        config = load_config(path)
        if quick:
            config = replace(config, audit=replace(config.audit, trials=QUICK_TRIALS),
                             data=replace(config.data, max_rows=QUICK_ROWS))
        folder = Path(out_dir) / "gate_proof" / config.mechanism.name
        results = run_audit(config, folder)
        write_results(folder / "results.json", results)
        verdict = results["verdict"]
        verdicts[config.mechanism.name] = verdict["status"]
        rows.append([config.mechanism.name, config.audit.trials, verdict["status"],
                     ", ".join(verdict.get("violations", [])) or "—"])
    caught = sum(status == "VIOLATION" for status in verdicts.values())
    sections = ["Each known-faulty mechanism audited with its shipped config (`configs/faulty/`); expected: "
                "VIOLATION." + (" QUICK MODE (fewer trials and rows: misses are possible)." if quick else ""),
                markdown_table(["mechanism", "trials", "verdict", "violated comparisons"], rows)]
    return write_reproduction(out_dir, "gate_proof", "Gate proof: known-faulty mechanisms are caught", sections,
                              {"quick": quick, "verdicts": verdicts}, f"{caught}/{len(verdicts)} faulty caught")
