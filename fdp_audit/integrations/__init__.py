"""Integrations with training libraries whose loops fdp-audit audits as written (docs/user_training.md).

A config's ``mechanism.integration`` names an entry of :data:`INTEGRATIONS` (an :class:`Integration`): how the
claim's unstated parts are read from one training of the user's loop, and what the library promised, judged
beside the games. Adding one is a module and one :func:`register_integration` line below (docs/extending.md).

Whatever the config's ``mechanism.integration``, the trials of the user's code (a training function or a
third-party mechanism) run inside :func:`library_caches` (:func:`fdp_audit.auditing.trials.trained_views`): the
caches of the libraries it has loaded, so that a pure computation a loop repeats in every trial (Opacus's noise
calibration for a target ε) is done once per process.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Protocol

from fdp_audit.auditing.promise import Promise
from fdp_audit.auditing.user_training import UserTrainer, user_trainer
from fdp_audit.config import Config
from fdp_audit.data.prepare import PreparedData
from fdp_audit.integrations import opacus
from fdp_audit.registry import Has, Registry, Rule
from fdp_audit.training.engine import TrainingProblem


class Promised(Protocol):
    """What a library promised in one training of the user's loop."""

    def summary(self) -> dict[str, Any]:
        """What results.json keeps of it.

        Returns:
            JSON-able facts, stored as ``reproducibility.<integration>_engine``.
        """

    def promise(self, delta: float) -> Promise | None:
        """The promise as a comparison the gate judges beside the games.

        Args:
            delta: the claim's δ.

        Returns:
            The comparison, or None when the library promised nothing beyond the claim the games judge.
        """


@dataclass(frozen=True)
class Integration:
    """A training library whose loops are audited as written, named by ``mechanism.integration``.

    ``claimed_config(config, data)`` trains the user's loop once on S, before any trial, and returns the config
    with the claim's unstated parts read from what the library was set up with, and what it promised.
    ``promises``: every training through it states a promise (:meth:`Promised.promise` is never None), so the
    gate requires a promise in the results of a configuration naming it (one deleted is refused)."""

    name: str
    description: str
    claimed_config: Callable[[Config, PreparedData], tuple[Config, Promised]]
    promises: bool = False
    # judges every trial's training beside the games: given the claimed config and the trials' trainer, a function
    # of a trial's seed giving the context manager to train it in
    each_training: Callable[[Config, Any], Callable[[int], contextlib.AbstractContextManager[None]]] | None = None


INTEGRATIONS: Registry[Integration] = Registry("integration", "mechanism.integration", (
    Has("description", str),
    Rule(lambda entry, _: entry.name != "none", "'none' means no integration"),
    Rule(lambda entry, _: callable(entry.claimed_config), "needs a claimed_config function"),
))


def register_integration(entry: Integration) -> Integration:
    """Make an integration nameable in ``mechanism.integration``.

    Args:
        entry: the integration.

    Returns:
        ``entry`` itself.

    Raises:
        ValueError: the name is taken or ``none``, or the entry is malformed.
    """
    return INTEGRATIONS.register(entry)


def integrated_claim(config: Config, data: PreparedData) -> tuple[Config, Promised | None]:
    """The config with the claim its integration reads from the user's loop (itself without an integration).

    Args:
        config: a validated configuration.
        data: its prepared data (the loop's training set S).

    Returns:
        The completed config, and what the library promised (None without an integration).

    Raises:
        BadInputError: ``mechanism.integration`` is not registered.
    """
    if config.mechanism.integration == "none":
        return config, None
    return INTEGRATIONS[config.mechanism.integration].claimed_config(config, data)


def training_check(config: Config, trainer: Any) -> Callable[[int], contextlib.AbstractContextManager[None]]:
    """What runs around each trial's training of the user's loop: the integration's check of it
    (:attr:`Integration.each_training`), else nothing.

    Args:
        config: a validated (claimed) configuration.
        trainer: the trials' :class:`~fdp_audit.auditing.user_training.UserTrainer`.

    Returns:
        A function of the trial's seed giving the context manager to train it in.
    """
    entry = None if config.mechanism.integration == "none" else INTEGRATIONS[config.mechanism.integration]
    if entry is None or entry.each_training is None:
        return contextlib.nullcontext
    return entry.each_training(config, trainer)


def checked_user_trainer(config: Config, problem: TrainingProblem) -> UserTrainer:
    """The trainer of ``config``'s user loop on ``problem`` with the integration's check around each trial's
    training (:func:`training_check`): what the games train the user's loop with.

    Args:
        config: a validated (claimed) configuration naming ``mechanism.training``.
        problem: the training problem (data set S, model) of the trials.

    Returns:
        The :class:`~fdp_audit.auditing.user_training.UserTrainer` of
        :func:`~fdp_audit.auditing.user_training.user_trainer` with its ``each_training`` set.
    """
    trainer = user_trainer(config, problem)
    return replace(trainer, each_training=training_check(config, trainer))


@contextlib.contextmanager
def library_caches() -> Iterator[None]:
    """Within the block, the loaded libraries' pure computations are cached (Opacus:
    :func:`fdp_audit.integrations.opacus.calibration_cached`); a library not loaded yet is left alone (importing
    it here would cost seconds for code that does not use it).

    Yields:
        Nothing; the block runs once, and the caches are removed after it.
    """
    with contextlib.ExitStack() as stack:
        if "opacus.privacy_engine" in sys.modules:
            stack.enter_context(opacus.calibration_cached())
        yield


register_integration(Integration("opacus", "Opacus's PrivacyEngine: the claim is what make_private or "
                                 "make_private_with_epsilon was set up with", opacus.claimed_config,
                                 promises=True, each_training=opacus.promise_check))
