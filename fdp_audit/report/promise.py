"""The report section of a training's promise (results.json ``promise``, docs/files.md): what the training promised
its DP library — a target ε over epochs, or a noise multiplier over the steps planned — and what the library's
accountant counted while the loop ran, with both ε by exact (PLD) accounting at the same δ."""

from __future__ import annotations

from fdp_audit.report import texts
from fdp_audit.report.model import Cell, Node, Section, Table, num, scalar, status

PROMISE = texts.Help(
    "With an integration (mechanism.integration), the claim is what the training promised its DP library: the "
    "target ε and epochs given to make_private_with_epsilon, or make_private's noise multiplier over the steps "
    "planned. The library's accountant records what the loop really ran; both are accounted here by exact PLD "
    "accounting at the same δ.",
    "Kept when the ε spent is at most the ε promised. A loop that took more steps than planned, or lowered the "
    "noise multiplier, breaks its promise: a VIOLATION whatever the library reports afterwards. A configuration "
    "that states its own claim (noise_multiplier or target_epsilon) has the ε spent held to that claim too, at the "
    "configuration's δ (its target ε, or its z's ε at the plan's sample rate and steps): spending more is a "
    "VIOLATION (status claim_exceeded) even when the promise was kept. It judges the claim at that one δ, not its "
    "whole curve (the games do). This is no statistical test (it is judged without error), so it is not counted in "
    "the Bonferroni correction.",
)


def promise_section(node: Node) -> Section:
    """The promise: the plan beside what was run, ε promised and spent, steps planned and taken, and the
    accountant's history of runs.

    Args:
        node: results' ``promise`` section.

    Returns:
        The section.

    Raises:
        BadInputError: the section breaks the contract.
    """
    section = Section("promise", "The promise to the DP library", PROMISE)
    facts = (("status", "status"), ("library", "library"), ("source", "promised through"),
             ("target_epsilon", "target ε"), ("epochs", "epochs"), ("delta", "δ"),
             ("promised_epsilon", "ε promised (PLD)"), ("spent_epsilon", "ε spent (PLD)"),
             ("claimed_epsilon", "ε the configuration claims, at its δ"),
             ("spent_epsilon_at_claim", "ε spent at the configuration's δ (PLD)"),
             ("steps_planned", "steps planned"), ("steps_taken", "steps taken"),
             ("engine_epsilon", "ε by the library's accountant (shown, never judged)"))
    for key, label in facts:
        child = node.present(key)
        if child is None:
            continue
        cell = status(child) if key == "status" else scalar(child)
        section.facts.append((label, cell or Cell("—")))
    planned = node.present("planned")
    if planned is not None:
        section.facts += [(f"planned {label}", num(planned[key])) for key, label in
                          (("noise_multiplier", "noise multiplier z"), ("sample_rate", "sample rate p"))
                          if planned.present(key)]
    claimed = node.present("claimed")
    if claimed is not None:
        section.facts += [(f"claimed {label}", num(claimed[key])) for key, label in
                          (("noise_multiplier", "noise multiplier z"), ("target_epsilon", "target ε"),
                           ("delta", "δ"))
                          if claimed.present(key)]
    trained = node.present("trained")
    if trained is not None:
        rows = [[num(run["noise_multiplier"]), num(run["sample_rate"]), num(run["steps"])]
                for run in trained.elements()]
        section.tables.append(Table("promise-trained", ("Noise multiplier z", "Sample rate p", "Steps"), rows,
                                    caption="What the library's accountant counted, run by run"))
    return section
