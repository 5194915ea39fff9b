"""An audit's title (fdp_audit/auditing/labels.py): what was audited, unless the config names the report itself."""

from __future__ import annotations

from pathlib import Path

from fdp_audit.auditing.labels import audit_title
from fdp_audit.config import load_config

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_the_title_says_what_was_audited_unless_the_config_gives_one() -> None:
    tour = load_config(CONFIGS / "adult_fdp.yaml")
    assert audit_title(tour) == "adult_fdp: fdp_sgd on adult (protected: marital-status, relationship)"
    assert audit_title(tour, "one-run audit").startswith("adult_fdp (one-run audit): fdp_sgd on adult")
    assert audit_title(load_config(CONFIGS / "images_games.yaml")) == "images_games: fdp_sgd on digits"
    many = tour.with_overrides({"data.protected": ["age", "sex", "race", "relationship"]})
    assert audit_title(many).endswith("(4 attributes protected)")
    assert audit_title(tour.with_overrides({"report.title": "Nightly audit"})) == "Nightly audit"


def test_an_attacks_registered_title_names_it_wherever_a_person_reads_it() -> None:
    """The report's rows, the comparison labels of the verdict, JUnit and the terminal name an attack by its
    registry entry's title; an unregistered attack (a newer results.json) by its stored name; ids stay stored."""
    from attacks import ATTACKS
    from fdp_audit.auditing.labels import comparison_label
    from fdp_audit.report.summary import build_summary

    comparisons = [{"id": f"attribute/{name}", "kind": "rate", "game": "attribute", "attack": name, "trials": 200,
                    "successes": 190, "ball": 0.5, "bound": 0.6} for name in ("likelihood", "unregistered")]
    summary = build_summary({"verdict": {"status": "VIOLATION", "alpha": 0.05}, "comparisons": comparisons})
    rows = {row.id: row for panel in summary.panels for row in panel.rows}
    assert rows["attribute/likelihood"].attack == ATTACKS["likelihood"].title != "likelihood"
    assert rows["attribute/unregistered"].attack == "unregistered"
    assert comparison_label(comparisons[0]).endswith(f" · {ATTACKS['likelihood'].title}")
    aligned = {"id": "distinguishing-epsilon/iterates_public_aligned", "kind": "epsilon", "game": "distinguishing",
               "attack": "iterates_public_aligned", "relation": "replace"}
    assert "iterates_public_aligned" not in comparison_label(aligned)


def test_every_one_run_threat_model_the_guesser_scores_has_words() -> None:
    """The final-weights threat model had no entry and reached the report as "final"."""
    import numpy as np

    from fdp_audit.auditing.labels import THREAT_MODELS
    from fdp_audit.auditing.one_run.guesser import Release, threat_scores

    m, steps, null = 4, 3, 2
    pattern = np.array([1.0, -1.0])
    final_only = Release(np.zeros(m), np.zeros(null))
    released = Release(np.zeros(m), np.zeros(null), np.zeros((steps, m)), np.zeros((steps, null)),
                       public_updates=np.ones((steps, m)))
    threats = set(threat_scores(final_only, pattern)) | set(threat_scores(released, pattern))
    assert threats == {"final", "updates", "updates_public_aligned"}
    assert threats <= set(THREAT_MODELS)


def test_every_games_threat_model_has_words() -> None:
    from attacks.base import THREAT_MODELS as GAME_THREAT_MODELS
    from fdp_audit.auditing.labels import THREAT_MODELS, threat_title

    assert set(GAME_THREAT_MODELS) <= set(THREAT_MODELS)
    assert threat_title("white_box") == "white box (final weights)"
