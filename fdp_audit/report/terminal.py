"""What the commands print about a verdict (docs/files.md, "The gate's outputs"): one line with the status (a PASS
with sanity warnings says it is weak), the level and the judged comparisons beside their total, then one line
per sanity warning. ``audit``, ``gate`` and ``demo`` print the same lines for the same results."""

from __future__ import annotations

from typing import Any

from fdp_audit.auditing.sanity import SanityWarning, weak_pass


def judged_count(verdict: dict[str, Any]) -> str:
    """``8 of 10 comparisons judged``: a comparison that cannot fail at its trials is counted but not judged.

    Args:
        verdict: results.json's ``verdict`` (``n_comparisons``, ``not_judged``).

    Returns:
        The phrase.
    """
    total = int(verdict.get("n_comparisons") or 0)
    judged = total - len(verdict.get("not_judged") or ())
    return f"{judged} of {total} comparison{'s' * (total != 1)} judged"


def verdict_lines(verdict: dict[str, Any], warnings: list[SanityWarning]) -> list[str]:
    """The verdict line, then ``warning: …`` per sanity warning.

    Args:
        verdict: results.json's ``verdict`` (``status``, ``alpha``, ``explanation``, ...).
        warnings: the results' sanity warnings (a PASS with any is shown as a weak pass).

    Returns:
        The lines to print, without newlines.
    """
    alpha = verdict.get("alpha")
    level = f" at α={alpha:g}" if isinstance(alpha, int | float) else ""
    head = f"{weak_pass(verdict['status'], warnings)}{level}, {judged_count(verdict)}: {verdict['explanation']}"
    return [head, *(f"warning: {warning.message}" for warning in warnings)]
