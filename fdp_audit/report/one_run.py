"""The report section of a one-run audit (results.json ``one_run``): the headline guesses, the claim, the ε lower
bounds, and one row per threat model's comparison."""

from __future__ import annotations

from fdp_audit.report import texts
from fdp_audit.report.model import Cell, Node, Section, Table, num, scalar, threat_cell

ONE_RUN = texts.Help(
    "Canaries inserted in one training, each with a random secret (inclusion, or a protected value from a known "
    "prior with Ψ fixed); the auditor ranks them by confidence and guesses the most confident ones, as many as the "
    "claim alone fixes before anything is seen, abstaining on the rest. The right guesses are tested against the "
    "claimed trade-off curve with the f-DP one-run analysis of Mahloujifar, Melis & Chaudhuri (ICML 2025), "
    "Bonferroni-corrected over the threat models.",
    "VIOLATION when some threat model's guesses reject the claimed curve. The empirical ε values are lower bounds "
    "at the same confidence: in the claimed mechanism's family (smaller noise multiplier), for μ-GDP claims, and "
    "the family-free (ε, δ) bound of Steinke, Nasr & Jagielski (NeurIPS 2023).",
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
    for key, label in (("status", "verdict"), ("claim", "claim audited"), ("game", "game"), ("k", "candidates k"),
                       ("canaries", "canaries"), ("claimed_epsilon", "claimed ε"), ("delta", "δ"),
                       ("empirical_epsilon", "empirical ε (claimed family)"),
                       ("empirical_epsilon_family", "family"), ("epsilon_gdp", "empirical ε (μ-GDP claims)"),
                       ("epsilon_steinke", "empirical ε (Steinke et al.)"), ("tightness", "empirical / claimed ε"),
                       ("epsilon_order_statistics", "empirical ε (order statistics; assumes independent canaries)"),
                       ("level_per_comparison", "level of each comparison")):
        child = node.present(key)
        if child:
            section.facts.append((label, scalar(child) or Cell("—")))
    rows = [[threat_cell(r["threat_model"]), num(r["guesses"]),
             num(r["correct"]), num(r["abstentions"]),
             Cell("rejected" if r["rejects_claim"].value else "not rejected"),
             num(r["epsilon_gdp"]), num(r["epsilon_steinke"], nullable=True)]
            for r in node["rows"].elements()]
    section.tables.append(Table("one-run-table", ("Threat model", "Guesses", "Correct", "Abstentions",
                                                  "Claimed f", "ε (μ-GDP)", "ε (Steinke)"), rows))
    return section
