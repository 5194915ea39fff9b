"""The game audit (docs/games.md): play the configured games, judge every comparison with the
gate, and assemble ``results.json``."""

from __future__ import annotations

import datetime
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fdp_audit.accounting.tradeoff import gaussian_tradeoff
from fdp_audit.auditing.games import (
    Comparison,
    Game,
    Judged,
    Judgements,
    PlannedComparison,
    configured_games,
    selection_level,
)
from fdp_audit.auditing.gate import NOT_JUDGED, comparison_status, judge, powerless, unjudgeable
from fdp_audit.auditing.journal import Journal
from fdp_audit.auditing.labels import audit_title
from fdp_audit.auditing.promise import KIND as PROMISE
from fdp_audit.auditing.promise import (
    BrokenPromise,
    Promise,
    claimed_schedule,
    mark_promise_broken,
    promise_section,
)
from fdp_audit.auditing.provenance import journal_key, user_source_digests, versions
from fdp_audit.auditing.third_party import load_mechanism, train_third_party
from fdp_audit.auditing.trials import DEFAULT_CHUNK, play_game, refuse_what_cannot_fit
from fdp_audit.auditing.user_training import train_user_trials
from fdp_audit.claim import Claim
from fdp_audit.config import Config
from fdp_audit.data.prepare import PreparedData, prepare_data
from fdp_audit.errors import BadInputError
from fdp_audit.execution import Executor, executor_for
from fdp_audit.integrations import checked_user_trainer, integrated_claim
from fdp_audit.json_numbers import finite_or_none
from fdp_audit.mechanisms import MECHANISMS
from fdp_audit.training.engine import Canaries, accuracy, train_models
from fdp_audit.training.run import build_problem, resolve_device, with_mechanism

DELTAS = (1e-3, 1e-5, 1e-6)
# The per-bound level at which ε comparisons select their test when the audit's is not given: α = 0.05 over
# about 20 bounds, a typical audit. It affects power only.
DEFAULT_SELECTION_LEVEL = 0.05 / 20


def rdp_epsilon(z: float, p: float, steps: int, delta: float) -> float:
    """ε from the RDP accountant, for comparison only (looser than the PLD).

    Args:
        z: the noise multiplier.
        p: the Poisson sampling rate.
        steps: the number of steps T.
        delta: the δ at which ε is read.

    Returns:
        ε of T compositions of the Poisson-subsampled Gaussian mechanism (dp_accounting's RDP accountant).
    """
    import dp_accounting

    acct = dp_accounting.rdp.RdpAccountant()
    acct.compose(dp_accounting.PoissonSampledDpEvent(p, dp_accounting.GaussianDpEvent(z)), steps)
    return float(acct.get_epsilon(delta))


def accounting_section(claim: Claim) -> dict[str, Any]:
    """The ``accounting`` section of ``results.json``: ε at the usual δ under both relations, the claimed curve
    (with its optimistic companion and, for Gaussian claims, the GDP approximation) and the RDP ε beside them.

    Args:
        claim: the privacy claim under audit.

    Returns:
        ``epsilon`` and ``epsilon_replace`` by δ, ``curve`` (α, f, f_replace, f_optimistic and, for a Gaussian
        claim, f_gdp_approx), and for a Gaussian claim ``gdp_mu_approx`` and ``epsilon_rdp``.
    """
    add_remove, replace_one = claim.add_remove, claim.replace_one
    alpha = np.unique(np.concatenate([np.geomspace(1e-6, 1.0, 120), np.linspace(0.0, 1.0, 41)]))
    section: dict[str, Any] = {
        "epsilon": {f"{d:g}": float(add_remove.epsilon(d)) for d in DELTAS},
        "epsilon_replace": {f"{d:g}": float(replace_one.epsilon(d)) for d in DELTAS},
        "curve": {"alpha": alpha.tolist(), "f": np.asarray(add_remove.f(alpha)).tolist(),
                  "f_replace": np.asarray(replace_one.f(alpha)).tolist(),
                  "f_optimistic": np.asarray(add_remove.tightness_band(alpha)[1]).tolist()},
    }
    mu = add_remove.gdp_clt_mu()
    if mu is not None:
        section["gdp_mu_approx"] = mu
        section["curve"]["f_gdp_approx"] = np.asarray(gaussian_tradeoff(alpha, mu)).tolist()
        section["epsilon_rdp"] = {f"{d:g}": rdp_epsilon(claim.noise_multiplier, claim.sample_rate, claim.steps, d)
                                  for d in DELTAS}
    return section


def utility_section(config: Config, data: PreparedData, claim: Claim, models: int = 3) -> dict[str, Any]:
    """Test accuracy of the configured mechanism (whose claim is ``claim``) beside DP-SGD, public-only and
    non-private training.

    Args:
        config: the audit's configuration.
        data: its prepared data.
        claim: the configured mechanism's claim.
        models: the models trained per mechanism.

    Returns:
        ``metric``, ``models_per_mechanism``, ``chance`` (the most frequent test label's share) and one row per
        mechanism (the user's code first, when audited) with its mean accuracy, standard deviation and ε.
    """
    device = resolve_device(config.device)
    x_test, y_test = torch.as_tensor(data.test.x, device=device), torch.as_tensor(data.test.y, device=device)
    rows = []
    third_party, training = config.mechanism.third_party, config.mechanism.training
    user = third_party or training
    names = ((f"third-party {user}",) if user else ()) + (config.mechanism.name, "dp_sgd", "public_only",
                                                          "nonprivate")
    for name in dict.fromkeys(names):
        builtin = name != names[0] if user else name != config.mechanism.name
        cfg = with_mechanism(config, name) if builtin else config
        problem = build_problem(cfg, data)
        if user and name == names[0]:  # the user's code, each model without a canary
            absent = torch.zeros(models, dtype=torch.bool)
            canaries = Canaries(torch.zeros(models, data.train.n_features), torch.zeros(models, dtype=torch.long),
                                absent, absent)
            trained = (train_user_trials(checked_user_trainer(config, problem), config.seed + 1, torch.arange(models),
                                         canaries, False) if training else
                       train_third_party(load_mechanism(third_party), problem, config.seed + 1, torch.arange(models),
                                         canaries, record_iterates=False))
            params = [view.params for _, view in trained]
        else:
            params = [chunk.params for chunk in train_models(problem, config.seed + 1, range(models), device=device,
                                                             progress=f"utility baseline {name}")]
        acc = torch.cat([accuracy(problem.model, {k: v.to(device) for k, v in p.items()}, x_test, y_test)
                         for p in params])
        eps = claim.epsilon if cfg.mechanism.name == config.mechanism.name else Claim.from_config(cfg).epsilon
        entry = MECHANISMS[cfg.mechanism.name]
        rows.append({"mechanism": name, "accuracy": float(acc.mean()), "std": float(acc.std()) if models > 1 else None,
                     "epsilon": eps, "faulty": entry.faulty, "public_features": entry.recipe.public_batch != "none"})
    # what a constant guess of the most frequent test label scores: a model at or below it learned nothing
    chance = float(np.bincount(np.asarray(data.test.y, dtype=np.int64)).max() / len(data.test.y))
    return {"metric": "test accuracy", "models_per_mechanism": models, "chance": chance, "rows": rows}


def audit_trials_needed(planned: PlannedComparison, judged_trials: int) -> int:
    """The fewest audit trials at which a planned comparison is judged on ``judged_trials``.

    Args:
        planned: the planned comparison.
        judged_trials: the judged trials it needs.

    Returns:
        The audit's trials.
    """
    trials = judged_trials
    while planned.evaluated(trials) < judged_trials:
        trials += 1
    return trials


def judge_games(records: list[tuple[Game, Any]], claim: Claim, alpha: float, selection_level: float,
                promises: tuple[Promise, ...] = ()) -> tuple[dict[str, Any], list[Comparison | Promise], Judgements]:
    """Every played game's comparisons, judged together (Bonferroni over all of them) against ``claim``, and the
    training's ``promises``: the verdict, the comparisons in order, and their judgements.

    Args:
        records: each played game with its record.
        claim: the privacy claim under audit.
        alpha: the audit's α.
        selection_level: the per-bound level of test selection.
        promises: the training's promises, judged beside the comparisons.

    Returns:
        ``(verdict, comparisons, judgements)``.
    """
    comparisons = ([c for game, record in records for c in game.comparisons(record, claim, selection_level)]
                   + list(promises))
    verdict, judged = judge([c.row() for c in comparisons], alpha, claim)
    return verdict, comparisons, Judgements(Judged(c, j, comparison_status(j))
                                             for c, j in zip(comparisons, judged, strict=True))


def run_audit(config: Config, out_dir: Path | None, command: str = "", executor: Executor | None = None
              ) -> dict[str, Any]:
    """Play the configured games, their trials on ``executor`` (by default the one ``audit.executor`` names,
    started before the audit is planned, so that a cluster's workers get ready meanwhile, and stopped after
    the last trial), and return the results dictionary (verdict included), as results.json holds it:
    non-finite numbers (the ε of a non-private baseline) are null, so the report renders the same numbers
    from this dictionary as from the file.

    Args:
        config: the validated configuration.
        out_dir: the folder of the audit's journal (``journal.jsonl``), or None for no journal.
        command: the command line recorded for reproduction.
        executor: where trials run, or None for ``audit.executor``'s.

    Returns:
        The results dictionary.

    Raises:
        BadInputError: the audit cannot be judged (comparisons that cannot fail, no attack), or its inputs are
            invalid.
    """
    if executor is not None:
        return _run_audit(config, out_dir, command, executor)
    with executor_for(config.audit) as chosen:
        return _run_audit(config, out_dir, command, chosen)


@dataclass(frozen=True)
class PlayedGames:
    """The configured games played and judged together: the verdict, every comparison with its judgement, and
    each game's record."""

    verdict: dict[str, Any]
    comparisons: list[Comparison | Promise]
    judgements: Judgements
    records: list[tuple[Game, Any]]
    claim: Claim

    def sections(self, alpha: float) -> list[dict[str, Any]]:
        """The games' sections of ``results.json``.

        Args:
            alpha: the verdict's level.

        Returns:
            Every game's sections, in the games' order.
        """
        return [section for game, record in self.records
                for section in game.sections(record, self.judgements, self.claim, alpha)]


def play_games(config: Config, data: PreparedData, journal: Journal, executor: Executor,
               device: torch.device | str = "cpu", claim: Claim | None = None,
               promises: tuple[Promise, ...] = (), promise_broken: bool = False) -> PlayedGames:
    """Refuse an audit whose comparisons cannot fail before anything is trained, then play every configured game
    (:func:`fdp_audit.auditing.trials.play_game`) and judge all their comparisons together against ``claim`` (by
    default the configuration's), with the training's ``promises`` (:mod:`fdp_audit.auditing.promise`).

    Args:
        config: the validated configuration.
        data: its prepared data.
        journal: the journal of played trials.
        executor: where trials run.
        device: the training device.
        claim: the claim the comparisons are judged against.
        promises: the training's promises.
        promise_broken: the one compared is a trial's broken promise
            (:func:`fdp_audit.auditing.promise.mark_promise_broken`).

    Returns:
        The played games, judged.

    Raises:
        BadInputError: the planned comparisons cannot fail, no attack can be judged, the played ones are NOT
            JUDGED, or a game's trial does not fit in memory.
    """
    audit = config.audit
    claim = claim or Claim.from_config(config)
    chunk = audit.max_models_per_chunk or DEFAULT_CHUNK
    games = configured_games(config)
    planned = {p.comparison.id: p for game in games for p in game.planned(config, data, claim)}
    found = [replace(p, trials_needed=None if p.trials_needed is None
                     else audit_trials_needed(planned[p.id], p.trials_needed))
             for p in powerless([p.comparison.row() for p in planned.values()], audit.alpha, claim)]
    refusal = unjudgeable(found, audit.alpha, len(planned)) if planned else None
    if refusal is not None:  # before anything is trained
        raise BadInputError(refusal, "audit.trials")
    setups = {game.name: game.setup(config, data) for game in games}
    for game in games:  # every game's trial must fit before any is trained
        refuse_what_cannot_fit(game, config, setups[game.name], device)
    records = [(game, play_game(game, config, data, journal, executor, device, chunk, setups[game.name],
                                promise_broken)) for game in games]
    verdict, comparisons, judgements = judge_games(records, claim, audit.alpha, selection_level(config), promises)
    if not comparisons:  # the games refuse their own misconfigurations first
        raise BadInputError("no configured attack can be judged in the configured games (only the prior?)",
                            "audit.attacks")
    if verdict["status"] == NOT_JUDGED:  # the plan is the favourable case; the real counts decide
        raise BadInputError(verdict["explanation"], "audit.trials")
    return PlayedGames(verdict, comparisons, judgements, records, claim)


def _run_audit(config: Config, out_dir: Path | None, command: str, executor: Executor) -> dict[str, Any]:
    data = prepare_data(config.data, config.seed)
    config, engine = integrated_claim(config, data)  # the claim's unstated parts, read from the user's loop
    audit, claim = config.audit, Claim.from_config(config)
    device = resolve_device(config.device)
    sources = user_source_digests if claim.user_code is not None else None
    journal = (Journal(None, "") if out_dir is None
               else Journal(out_dir / "journal.jsonl", journal_key(config, versions(), data), sources))
    promised = None if engine is None else engine.promise(config.mechanism.delta)
    if promised is not None:  # judged against the configuration's claim too where it states its own
        promised = promised.claiming(claimed_schedule(claim))
    promises = () if promised is None else (promised,)
    try:
        played = play_games(config, data, journal, executor, device, claim, promises)
    except BrokenPromise as broken:  # the probe kept its promise, this trial did not: its promise is compared
        promised, promises = broken.promise, (broken.promise,)
        mark_promise_broken(config)
        played = play_games(config, data, journal, executor, device, claim, promises, promise_broken=True)
    if journal.reused:
        counts = ", ".join(f"{game} {count}" for game, count in journal.reused.items())
        print(f"fdp-audit: reused {sum(journal.reused.values())} trials from {journal.path} ({counts})",
              file=sys.stderr)
    tightness = [row for game, record in played.records
                 for row in game.tightness_rows(record, played.judgements, played.claim)]
    return finite_or_none({
        "schema_version": 1, "kind": "audit", "title": audit_title(config),
        "created": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "verdict": played.verdict,
        "mechanism": claim.section(),
        "accounting": accounting_section(claim),
        "games": played.sections(audit.alpha),
        # no section when no played game measures tightness: a header without rows tells a reader nothing
        "tightness": {"rows": tightness} if tightness else None,
        "utility": utility_section(config, data, claim),
        "comparisons": [c.row() for c in played.comparisons],
        **({} if promised is None else {PROMISE: promise_section(promised.row(), played.judgements.find(
            PROMISE, PROMISE, promised.attack).evaluation)}),
        "reproducibility": {
            "versions": versions(), "seed": config.seed, "config": config.to_dict(),
            "dataset": config.data.dataset, "dataset_fingerprint": data.fingerprint, "command": command,
            "device": str(device), "trials": audit.trials, "reused_trials": dict(journal.reused),
        } | ({} if engine is None else {f"{config.mechanism.integration}_engine": engine.summary()}),
    })




