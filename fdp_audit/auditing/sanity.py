"""Sanity warnings on an audit's results (docs/files.md, "Sanity warnings"): what makes a PASS weak although
every comparison was judged.

A PASS says that no attack beat its limit by more than chance explains. It says little when

* the model learned nothing: the audited mechanism's test accuracy is at or below that of chance (the test set's
  most frequent label) or, for a mechanism that uses the public features, of the public-only model (trained on
  Ψ(x) alone, at no privacy cost), so the audit attacked a model no one would ship;
* a section holds nothing: a game whose attacks list is empty, a table with a header and no rows;
* no attack of a game beat the prior: every attack's success rate is at or below Ball (what guessing from the prior
  alone achieves) in every comparison of that game, so the game's PASS reflects no leakage its attacks could find;
* a comparison passes only by chance: its measured success rate is above its limit and only its lower confidence
  bound is not (more trials would decide), or an ε test's lower bound is 0 (its trials could show no leakage).

The warnings are derived from the stored values alone, so ``audit``, ``gate`` and ``report`` give the same ones for
the same results.json; a PASS with any of them is reported as weak.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from fdp_audit.auditing.labels import comparison_label, game_title

LEARNED_NOTHING, EMPTY_SECTION, NEVER_BEAT_PRIOR = "learned_nothing", "empty_section", "never_beat_prior"
ABOVE_LIMIT, NO_POWER = "above_limit_by_chance", "epsilon_without_power"
# the sections of results.json that hold a list of rows, and the name of that list
ROW_LISTS = {"tightness": "rows", "utility": "rows", "one_run": "rows", "checkpoint_audit": "attacks"}
TOLERANCE = 1e-9  # two accuracies or a rate and Ball equal up to float rounding are equal


@dataclass(frozen=True)
class SanityWarning:
    """One warning: its kind, what it says, and where in results.json the values it rests on are."""

    kind: str
    message: str
    where: str

    def row(self) -> dict[str, str]:
        """The warning as ``results.json``'s ``warnings`` stores it.

        Returns:
            ``kind``, ``message`` and ``where``.
        """
        return asdict(self)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _learned_nothing(results: dict[str, Any]) -> Iterator[SanityWarning]:
    utility = results.get("utility")
    rows = utility.get("rows") if isinstance(utility, dict) else None
    if not isinstance(rows, list) or not rows or not all(isinstance(row, dict) for row in rows):
        return
    accuracy = {row.get("mechanism"): _number(row.get("accuracy")) for row in rows}
    audited, public = rows[0].get("mechanism"), accuracy.get("public_only")
    shown = _number(rows[0].get("accuracy"))
    if shown is None or audited == "public_only":
        return
    chance = _number(utility.get("chance"))
    # a DP claim treats every feature as private: the public-only model is no floor for it, chance is
    uses_public = rows[0].get("public_features", True) is not False
    floors = [(f"the public-only model's {public:.3f}", public)] if public is not None and uses_public else []
    floors += [(f"chance ({chance:.3f}, the most frequent test label)", chance)] if chance is not None else []
    beaten = [words for words, floor in floors if shown <= floor + TOLERANCE]
    if beaten:
        yield SanityWarning(LEARNED_NOTHING, f"the audited model learned nothing: {audited}'s test accuracy "
                            f"{shown:.3f} is at or below {' and '.join(beaten)}, so the attacks probed a model no "
                            "one would ship", "utility/rows/0/accuracy")
    nonprivate = accuracy.get("nonprivate")
    if nonprivate is not None and public is not None and nonprivate <= public + TOLERANCE:
        index = next(i for i, row in enumerate(rows) if row.get("mechanism") == "nonprivate")
        yield SanityWarning(LEARNED_NOTHING, f"even the non-private model ({nonprivate:.3f}) is no better than the "
                            f"public-only model ({public:.3f}): the model or its training cannot learn these data "
                            "beyond Ψ(x)", f"utility/rows/{index}/accuracy")


def _empty_sections(results: dict[str, Any]) -> Iterator[SanityWarning]:
    for key, rows in ROW_LISTS.items():
        section = results.get(key)
        if isinstance(section, dict) and isinstance(section.get(rows), list) and not section[rows]:
            yield SanityWarning(EMPTY_SECTION, f"the {key.replace('_', ' ')} section holds no {rows}",
                                f"{key}/{rows}")
    games = results.get("games")
    for g, game in enumerate(games if isinstance(games, list) else ()):
        if isinstance(game, dict) and isinstance(game.get("attacks"), list) and not game["attacks"]:
            yield SanityWarning(EMPTY_SECTION, f"the {game.get('game')} game's section holds no attacks",
                                f"games/{g}/attacks")


def _never_beat_prior(results: dict[str, Any]) -> Iterator[SanityWarning]:
    """One warning per game view (the part of a rate comparison's id before the attack) in which no attack but the
    prior beat Ball anywhere: an attack built for one fault stays at the prior's level on a correct mechanism, and
    the view's other attacks carry its evidence, but a view where none did carries none."""
    comparisons = results.get("comparisons")
    views: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for c, row in enumerate(comparisons if isinstance(comparisons, list) else ()):
        if (isinstance(row, dict) and row.get("kind") == "rate" and row.get("threat_model") != "prior"
                and isinstance(row.get("trials"), int) and row["trials"] > 0 and isinstance(row.get("id"), str)):
            views.setdefault(row["id"].split("/", 1)[0], []).append((c, row))
    for rows in views.values():
        rates = [(row, row.get("successes", 0) / row["trials"], _number(row.get("ball"))) for _, row in rows]
        if not all(ball is not None and rate <= ball + TOLERANCE for _, rate, ball in rates):
            continue
        best = max(rates, key=lambda found: found[1] - found[2])
        attacks = sorted({str(row.get("attack")) for row, _, _ in rates})
        row, rate, ball = best
        where = f" at ρ = {row['rho']:g}" if row.get("rho") is not None else ""
        yield SanityWarning(NEVER_BEAT_PRIOR, f"{game_title(row)}: no attack beat the prior ({', '.join(attacks)}; the "
                            f"closest, {row.get('attack')}{where}, succeeded {rate:.3f} ≤ Ball {ball:.3f} over "
                            f"{row['trials']} judged trials), so this game's PASS shows no leakage its attacks "
                            "could find", f"comparisons/{rows[0][0]}")


def _inconclusive(results: dict[str, Any]) -> Iterator[SanityWarning]:
    """A rate comparison whose measured rate is above its limit (it passes only because its trials cannot rule
    chance out), and an ε test whose stored lower bound (its game section's) is 0."""
    comparisons = results.get("comparisons")
    rows = [row for row in (comparisons if isinstance(comparisons, list) else ()) if isinstance(row, dict)]
    for c, row in enumerate(rows):
        bound = _number(row.get("bound"))
        if (row.get("kind") == "rate" and bound is not None and isinstance(row.get("trials"), int)
                and row["trials"] > 0 and isinstance(row.get("successes"), int)
                and row["successes"] / row["trials"] > bound + TOLERANCE):
            yield SanityWarning(ABOVE_LIMIT, f"{comparison_label(row)}: its measured rate "
                                f"{row['successes'] / row['trials']:.4g} is above its limit {bound:.4g}; it passes "
                                f"only because {row['trials']} judged trials cannot rule chance out, so its PASS is "
                                "inconclusive (more trials would decide)", f"comparisons/{c}")
    by_id = {row.get("id"): (c, row) for c, row in enumerate(rows)}
    games = results.get("games")
    for game in games if isinstance(games, list) else ():
        for attack in game.get("attacks", ()) if isinstance(game, dict) else ():
            if not isinstance(attack, dict) or _number(attack.get("epsilon_lower_bound")) != 0.0:
                continue
            c, row = by_id.get(f"{game.get('game')}-epsilon/{attack.get('attack')}", (None, None))
            if row is not None:
                yield SanityWarning(NO_POWER, f"{comparison_label(row)}: its ε lower bound is 0 against the claimed "
                                    f"ε, so its trials could show no leakage at all and its PASS is inconclusive",
                                    f"comparisons/{c}")


def sanity_warnings(results: dict[str, Any]) -> list[SanityWarning]:
    """Every sanity warning of ``results`` (a results.json dictionary), in a fixed order: learned nothing, empty
    sections, games in which no attack beat the prior (each named by its title in the report), comparisons that
    pass only by chance.

    Args:
        results: the audit's results.

    Returns:
        The warnings, none when the PASS (if any) rests on something.
    """
    return [*_learned_nothing(results), *_empty_sections(results), *_never_beat_prior(results),
            *_inconclusive(results)]


def weak_pass(status: str, warnings: list[SanityWarning]) -> str:
    """The verdict's status with what makes it weak: ``PASS (weak: 2 sanity warnings)``.

    Args:
        status: the verdict's status.
        warnings: the results' sanity warnings.

    Returns:
        ``status`` unchanged unless it is PASS with warnings.
    """
    if status != "PASS" or not warnings:
        return status
    return f"PASS (weak: {len(warnings)} sanity warning{'s' * (len(warnings) != 1)})"
