"""The report section of a one-run audit (results.json ``one_run``): the headline guesses, the claim, the ε lower
bounds, and one row per threat model's comparison."""

from __future__ import annotations

from fdp_audit.report import texts
from fdp_audit.report.model import Cell, Node, Section, Table, num, scalar, threat_cell

ONE_RUN = texts.Help(
    "Canaries inserted in one training, each with a random secret (inclusion, or a protected value from a known "
    "prior with Ψ fixed); the auditor ranks them by confidence and guesses the most confident ones, as many as the "
    "claim alone fixes before anything is seen, abstaining on the rest. Gradient canaries are judged by two tests: "
    "the conformance test (the order statistics of Xiang et al., 2025: its null is that the training behaves as the "
    "claimed DP-SGD, canaries independent, each within the claimed curve) and the count test (the f-DP one-run "
    "analysis of Mahloujifar, Melis & Chaudhuri, ICML 2025, valid for any mechanism meeting the claimed curve), each "
    "at α/2, Bonferroni-corrected over the threat models. Input canaries share one model and get the count test "
    "alone.",
    "VIOLATION when either test rejects for some threat model: under the claimed mechanism at most α false alarms. "
    "The empirical ε values are lower bounds at the same confidence: in the claimed mechanism's family (smaller "
    "noise multiplier) by each test, for μ-GDP claims, and the family-free (ε, δ) bound of Steinke, Nasr & "
    "Jagielski (NeurIPS 2023).",
)


def one_run_section(node: Node) -> Section:
    """The one-run audit section: its facts (verdict, claim, candidates, canaries, claimed and empirical ε) and one
    row per threat model (guesses, correct, abstentions, whether the claimed f is rejected, ε lower bounds).

    Args:
        node: results' ``one_run`` section.

    Returns:
        The section.

    Raises:
        BadInputError: the section breaks the contract.
    """
    section = Section("one-run", "One-run audit", ONE_RUN)
    for key, label in (("status", "verdict"), ("combination", "how the tests combine"),
                       ("claim", "claim audited"), ("game", "game"), ("k", "candidates k"),
                       ("canaries", "canaries"), ("claimed_epsilon", "claimed ε"), ("delta", "δ"),
                       ("empirical_epsilon", "empirical ε (count test, claimed family)"),
                       ("empirical_epsilon_family", "family"), ("epsilon_gdp", "empirical ε (μ-GDP claims)"),
                       ("epsilon_steinke", "empirical ε (Steinke et al.)"),
                       ("tightness", "empirical / claimed ε (count test)"),
                       ("epsilon_order_statistics", "empirical ε (conformance test: the training behaves as the "
                                                    "claimed DP-SGD)"),
                       ("tightness_verdict", "empirical / claimed ε (the verdict's test)"),
                       ("level_per_comparison", "level of each comparison")):
        child = node.present(key)
        if child:
            section.facts.append((label, scalar(child) or Cell("—")))
    tests = node.present("tests")
    for test in tests.elements() if tests else ():
        name, null, rejects = test["test"].text(), test["null"].text(), test["rejects"].value
        section.facts.append((f"{name} test", Cell(f"{'rejects' if rejects else 'does not reject'} — null: {null}",
                                                   {test.pointer: test.value})))
    rows = [[threat_cell(r["threat_model"]), num(r["guesses"]),
             num(r["correct"]), num(r["abstentions"]),
             Cell("rejected" if r["rejects_claim"].value else "not rejected"),
             _conformance_cell(r),
             num(r["epsilon_gdp"]), num(r["epsilon_steinke"], nullable=True)]
            for r in node["rows"].elements()]
    section.tables.append(Table("one-run-table", ("Threat model", "Guesses", "Correct", "Abstentions",
                                                  "Count test: claimed f", "Conformance test: claimed DP-SGD",
                                                  "ε (μ-GDP)", "ε (Steinke)"), rows))
    return section


def _conformance_cell(row: Node) -> Cell:
    """The conformance test of one threat model: wrong guesses among the released ones and whether they reject the
    claimed DP-SGD (— for input canaries and results written before the test existed)."""
    wrong, released = row.present("wrong"), row.present("released")
    rejects = row.present("rejects_conformance")
    if wrong is None or released is None or wrong.value is None or released.value is None:
        return Cell("—")
    verdict = "rejected" if rejects is not None and rejects.value else "not rejected"
    return Cell(f"{verdict} ({wrong.value} wrong of {released.value})", {wrong.pointer: wrong.value})
