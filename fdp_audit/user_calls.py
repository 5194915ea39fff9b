"""Calling the user's code once per trial (docs/files.md, "The user's code"): a training function, a third-party
mechanism.

Each call is made in the calling thread, so that the user's code sees the thread and the random state it would
see in their own program (on the intra-op thread count its caller chose: :func:`fdp_audit.threads.threads_for`),
and:

* it gets copies of the audit's tensors (the caller passes them; :func:`copies`), so that a function that edits
  its inputs in place cannot change the data of later trials, or of the built-in baselines;
* the working folder is restored after it (a function that calls ``os.chdir`` would move the audit's outputs);
* with ``audit.trial_timeout`` (seconds), a call past its limit is interrupted by :class:`TrialTimeout` raised
  inside the user's code — by ``SIGALRM`` in the main thread, which also ends a ``sleep`` or a wait on a lock,
  elsewhere (an executor's worker threads) at its next Python instruction — and is bad input naming the field and
  showing where their code was. A call that does not stop (it waits inside a C extension, or catches the
  exception) is ended by the command line's supervisor (:mod:`fdp_audit.supervision`) a grace period later;
* a trial that runs long says so: a line on stderr at least every :data:`LINE_SECONDS` (the trial, of how many,
  and for how long), in the style of the phases' progress (:mod:`fdp_audit.phases`; none when it is off);
* the supervisor, if any, is told when the call starts and ends, so that a process ended inside the user's code
  (``os._exit``) is blamed on it.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import itertools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from fdp_audit.errors import BadInputError, UserCodeError
from fdp_audit.phases import progress_style
from fdp_audit.supervision import note_call, note_done
from fdp_audit.user_code import raise_failure, traceback_of_user_code

LINE_SECONDS = 10.0  # a trial of the user's code that runs this long is reported, and again as often
TIMEOUT_FIELD = "audit.trial_timeout"
_IDS = itertools.count(1)


class TrialTimeout(BaseException):  # noqa: N818 - named for what it says, as KeyboardInterrupt is
    """Raised inside the user's code when a trial runs past ``audit.trial_timeout``: a ``BaseException``, so that
    an ``except Exception`` of their loop does not swallow it."""


def copies(value: Any) -> Any:
    """A copy of ``value`` for the user's code: tensors cloned; dataclasses, dicts, lists and tuples rebuilt around
    copies; anything else deep-copied (``copy.deepcopy`` of a tensor is slower than ``clone`` by orders of
    magnitude).

    Args:
        value: what a call into the user's code is given (a training problem, a canary).

    Returns:
        The copy; no tensor of it shares memory with ``value``.
    """
    import copy

    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: copies(getattr(value, f.name))
                                             for f in dataclasses.fields(value) if f.init})
    if isinstance(value, dict):
        return {key: copies(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(copies(item) for item in value)
    return copy.deepcopy(value)


@contextlib.contextmanager
def supervised_call(field_name: str, what: str) -> Iterator[None]:
    """A call into the user's code outside a phase of trials (the model factory), told to the command line's
    supervisor, so that an ``os._exit`` or a fatal signal inside it is reported as theirs (bad input naming
    ``field_name``), not as an internal error.

    Args:
        field_name: the config field naming the code (``model.factory``).
        what: the call, in words (``"the model factory"``).

    Returns:
        A context manager around the call.
    """
    call_id = next(_IDS)
    note_call(call_id, None, field_name, what)
    try:
        yield
    finally:
        note_done(call_id)


@dataclass
class UserCalls:
    """The calls of one phase into the user's code, one per trial (module docstring).

    Args:
        field: the config field that names the code (``mechanism.training``).
        what: what it is, for messages (``"the training function"``).
        total: the trials of the phase.
        timeout: ``audit.trial_timeout`` in seconds, or None.
        on_trial: called after each trial (a phase's progress).
    """

    field: str
    what: str
    total: int
    timeout: float | None = None
    on_trial: Callable[[int], Any] | None = None
    done: int = 0
    started: float = field(default_factory=time.monotonic)
    last_line: float = field(default_factory=time.monotonic)

    def call(self, function: Callable[..., Any], args: tuple, seed: int | None) -> Any:
        """``function(*args)`` as the trial of ``seed``; its failure is bad input naming :attr:`field` (or
        fdp-audit's own error, when the failure is fdp-audit's: :func:`fdp_audit.user_code.raise_failure`).

        Args:
            function: the user's function.
            args: its arguments (copies: :func:`copies`).
            seed: the trial's seed, for messages (None: a call outside any trial, such as the model factory's
                first one).

        Returns:
            What the function returned.

        Raises:
            UserCodeError: the function raised, called ``sys.exit`` or ran past :attr:`timeout`.
        """
        running = _Running(self, seed, threading.get_ident(), threading.current_thread() is threading.main_thread())
        call_id = next(_IDS)
        folder = os.getcwd()
        trial = "" if seed is None else f" on a trial (seed {seed})"
        note_call(call_id, self.timeout, self.field, self.what if seed is None else
                  f"{self.what} on trial {self.done + 1} of {self.total} (seed {seed})")
        _WATCHDOG.add(running)
        try:
            with _alarm(running):
                result = function(*args)
                running.finished = True
            return result
        except TrialTimeout as err:
            raise UserCodeError(f"{self.what} ran past the limit of {self.timeout:g} s{trial}",
                                TIMEOUT_FIELD, traceback_of_user_code(err)) from None
        except (BadInputError, KeyboardInterrupt):  # fdp-audit's refusal inside their call; Ctrl-C
            raise
        except BaseException as err:  # noqa: BLE001 - sys.exit and any BaseException of theirs fail the trial
            raise_failure(err, f"{self.what} failed{trial}", self.field)
        finally:
            running.finished = True
            _WATCHDOG.remove(running)
            if running.interrupted:  # an interruption sent as the call ended must not reach fdp-audit's code
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(running.thread), None)
            note_done(call_id)
            with contextlib.suppress(OSError):  # a folder that was removed meanwhile cannot be returned to
                if os.getcwd() != folder:
                    os.chdir(folder)
            self.done += 1
            if self.on_trial is not None:
                self.on_trial(1)


@dataclass
class _Running:
    calls: UserCalls
    seed: int | None
    thread: int
    main: bool
    start: float = field(default_factory=time.monotonic)
    finished: bool = False
    interrupted: float = 0.0  # when the watchdog last interrupted it (threads other than the main one)


_MAIN_CALL: list[_Running] = []  # the call running in the main thread, for SIGALRM's handler


@contextlib.contextmanager
def _alarm(running: _Running):
    """In the main thread with a time limit: SIGALRM at the limit and every second after it (a loop that catches
    the exception is interrupted again) raises :class:`TrialTimeout` in the call."""
    timeout = running.calls.timeout
    if timeout is None or not running.main:
        yield
        return
    previous = signal.signal(signal.SIGALRM, _raise_timeout)
    _MAIN_CALL.append(running)
    signal.setitimer(signal.ITIMER_REAL, timeout, 1.0)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _MAIN_CALL.pop()
        signal.signal(signal.SIGALRM, previous)


def _raise_timeout(signum: int, frame: object) -> None:
    if _MAIN_CALL and not _MAIN_CALL[-1].finished:
        raise TrialTimeout


class _Watchdog:
    """One daemon thread per process, started on first use: progress lines for the running calls, and the
    interruption of calls past their limit in threads other than the main one."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running: dict[int, _Running] = {}
        self.thread: threading.Thread | None = None

    def add(self, running: _Running) -> None:
        with self.lock:
            self.running[id(running)] = running
            if self.thread is None:
                self.thread = threading.Thread(target=self.watch, name="fdp-audit user-code watchdog", daemon=True)
                self.thread.start()

    def remove(self, running: _Running) -> None:
        with self.lock:
            self.running.pop(id(running), None)

    def watch(self) -> None:
        while True:
            time.sleep(0.5)
            now = time.monotonic()
            with self.lock:
                running = list(self.running.values())
            for call in running:
                if not call.finished:
                    self.report(call, now)
                    self.interrupt(call, now)

    @staticmethod
    def report(call: _Running, now: float) -> None:
        calls, style = call.calls, progress_style()
        quiet = now - calls.last_line < LINE_SECONDS or (style == "bar" and now - call.start < LINE_SECONDS)
        if style == "off" or quiet:  # a bar moves with the trials: it needs a line only for a long one
            return
        calls.last_line = now
        line = (f"fdp-audit: {calls.what}: trial {calls.done + 1} of {calls.total} (seed {call.seed}) running for "
                f"{now - call.start:.0f} s, {now - calls.started:.0f} s since the first")
        if style == "bar":
            from tqdm.auto import tqdm

            tqdm.write(line, file=sys.stderr)
        else:
            print(line, file=sys.stderr, flush=True)

    @staticmethod
    def interrupt(call: _Running, now: float) -> None:
        timeout = call.calls.timeout
        if call.main or timeout is None or now < call.start + timeout or now < call.interrupted + 1.0:
            return
        call.interrupted = now
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(call.thread), ctypes.py_object(TrialTimeout))


_WATCHDOG = _Watchdog()
