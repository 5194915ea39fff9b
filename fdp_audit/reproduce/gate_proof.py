"""``gate_proof``: every known-faulty mechanism of ``configs/faulty/`` audited, each expected to be a
VIOLATION (docs/games.md, "Which game can see which fault"); the statistical guarantees of these verdicts are in
``tests/auditing/test_gate_proof.py`` and ``tests/auditing/test_soundness.py``. This entry regenerates the table for
the README, with the fewest trials that catch each mechanism.

*Fewest trials.* Trial i of a game depends on its index only (its secret, its model's streams), and the
selection/evaluation split is by index parity, so the first n trials of an N-trial audit are exactly the n-trial
audit. Every even n ≤ N is judged on the prefix (the same gate, with its Bonferroni correction over the same
comparisons); the table gives the smallest n from which every larger n up to N is a VIOLATION, and the smallest
n that is one at all (the verdict is not monotone in n: a lucky prefix can be caught early).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fdp_audit.auditing.games import Game, configured_games
from fdp_audit.auditing.gate import judge
from fdp_audit.auditing.journal import Journal
from fdp_audit.auditing.provenance import journal_key, versions
from fdp_audit.auditing.results import write_results
from fdp_audit.auditing.runner import DEFAULT_SELECTION_LEVEL, run_audit
from fdp_audit.auditing.trials import DEFAULT_CHUNK, play_game
from fdp_audit.claim import Claim
from fdp_audit.config import Config, load_config
from fdp_audit.data.prepare import prepare_data
from fdp_audit.reproduce import CONFIGS, Summary
from fdp_audit.reproduce.files import markdown_table, write_reproduction
from fdp_audit.training.run import resolve_device

FAULTY = CONFIGS / "faulty"
QUICK_TRIALS, QUICK_ROWS = 100, 2000


def fewest_trials(config: Config, records: list[tuple[Game, Any]]) -> dict[str, Any]:
    """Judge every even prefix of the played games; the smallest trial count caught from there on, and the
    smallest caught at all (``None``: never).

    Args:
        config: the faulty mechanism's configuration (its trials and α).
        records: each configured game with the record of its trials.

    Returns:
        ``{"first_caught": n or None, "caught_from": n or None}``.
    """
    claim = Claim.from_config(config)
    caught = []
    for n in range(2, config.audit.trials + 1, 2):
        comparisons = [c.row() for game, record in records for c in game.comparisons(record.head(n), claim,
                                                                                          DEFAULT_SELECTION_LEVEL)]
        caught.append((n, judge(comparisons, config.audit.alpha)[0]["status"] == "VIOLATION"))
    first = next((n for n, hit in caught if hit), None)
    steady = None
    for n, hit in reversed(caught):
        if not hit:
            break
        steady = n
    return {"first_caught": first, "caught_from": steady}


def run(out_dir: Path, quick: bool = False) -> Summary:
    """Audit every known-faulty mechanism of ``configs/faulty/`` and find the fewest trials that catch each; writes
    ``gate_proof.md``, ``gate_proof.json`` and each audit's files under ``gate_proof/<mechanism>/``.

    Args:
        out_dir: the folder the reproduction writes into.
        quick: the seconds-long version the test suite runs (module docstring).

    Returns:
        The reproduction's summary: how many of the faulty mechanisms were caught.
    """
    rows, verdicts, trials_needed = [], {}, {}
    for path in sorted(FAULTY.glob("*.yaml")):
        config = load_config(path)
        if quick:
            config = config.with_overrides({"audit.trials": QUICK_TRIALS, "data.max_rows": QUICK_ROWS})
        folder = Path(out_dir) / "gate_proof" / config.mechanism.name
        results = run_audit(config, folder)
        write_results(folder / "results.json", results)
        data = prepare_data(config.data, config.seed)
        journal = Journal(folder / "journal.jsonl", journal_key(config, versions(), data))  # the trials just played
        records = [(game, play_game(game, config, data, journal, device=resolve_device(config.device),
                                    max_chunk=config.audit.max_models_per_chunk or DEFAULT_CHUNK))
                   for game in configured_games(config)]
        needed = fewest_trials(config, records)
        verdict = results["verdict"]
        verdicts[config.mechanism.name] = verdict["status"]
        trials_needed[config.mechanism.name] = needed
        rows.append([config.mechanism.name, ", ".join(config.audit.games), config.audit.trials, verdict["status"],
                     ", ".join(verdict.get("violations", [])) or "—",
                     needed["caught_from"] or f"> {config.audit.trials}", needed["first_caught"] or "—"])
    caught = sum(status == "VIOLATION" for status in verdicts.values())
    sections = ["Each known-faulty mechanism audited with its shipped config (`configs/faulty/`); expected: "
                "VIOLATION. *Caught from*: the fewest trials from which every larger count (up to the config's) "
                "is a VIOLATION; *first caught*: the fewest that is one at all."
                + (" QUICK MODE (fewer trials and rows: misses are possible)." if quick else ""),
                markdown_table(["mechanism", "games", "trials", "verdict", "violated comparisons", "caught from",
                                "first caught"], rows)]
    return write_reproduction(out_dir, "gate_proof", "Gate proof: known-faulty mechanisms are caught", sections,
                              {"quick": quick, "verdicts": verdicts, "fewest_trials": trials_needed},
                              f"{caught}/{len(verdicts)} faulty caught")
