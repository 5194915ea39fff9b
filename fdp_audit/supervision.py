"""The command line's supervisor (docs/files.md, "Exit codes"): ``fdp-audit`` runs its command in a child process
and exits with the child's own account of how the command ended, never merely with the process's status.

The user's code runs inside the command (a model factory, a training function, a third-party mechanism) and can
end the process in ways no ``try`` sees: ``os._exit(0)`` would end an audit with status 0 and no results, and a
thread it leaves running would keep a finished audit from ever exiting. So the child tells the supervisor, through
a pipe, when a call into the user's code starts and ends and, once the command has returned and its output is
flushed, the exit code it chose; it then exits without waiting for stray threads. The supervisor exits with that
code, ending a child whose shutdown (an exit handler) still runs :data:`SHUTDOWN_SECONDS` later. A child that
ended without saying so ended inside the user's code (bad input, exit 2, one line naming it)
or inside fdp-audit's (internal error, exit 3); one killed by a signal keeps that signal's status (128 + N), inside
the user's code too when the supervisor forwarded that signal (the user stopped the command; its code did not). A
trial that runs past ``audit.trial_timeout`` is interrupted in the child (:mod:`fdp_audit.user_code`); one that
ignores the interruption for :data:`GRACE_SECONDS` more is ended here.

The supervisor imports neither torch nor the command's modules: it adds one interpreter start to a command (0.04 s
of CPU, against 0.12 s for ``fdp-audit --version`` itself). The library (``fdp_audit.audit`` and the rest) never
starts a supervisor; in a Python program the
channel is absent and the notes below do nothing.

Messages, one line each on the file descriptor named by ``FDP_AUDIT_SUPERVISOR_FD`` (the child removes the
variable from its environment, so that processes it starts do not write to a descriptor they do not have):
``call ID TIMEOUT FIELD WHAT`` (TIMEOUT in seconds, ``-`` for none), ``done ID``, ``exit CODE``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field

CHANNEL_VARIABLE = "FDP_AUDIT_SUPERVISOR_FD"
PARENT_VARIABLE = "FDP_AUDIT_SUPERVISOR_PID"
SHUTDOWN_SECONDS = 5.0  # after the child said its exit code, how long its shutdown (atexit, finalisers) may take
GRACE_SECONDS = 10.0  # after audit.trial_timeout, how long an interrupted trial may take to stop before it is ended
EXIT_BAD_INPUT, EXIT_INTERNAL = 2, 3
_CHILD = "import fdp_audit.supervision as s; s.child()"
DUPLICATE_SECONDS = 0.2  # a second SIGINT sooner than this after one is its copy (the terminal's and the forwarded)
_channel: int | None = None  # in a supervised child: the pipe to the supervisor
_last_interrupt = float("-inf")  # in a supervised child: when SIGINT last interrupted the command


def note_call(call_id: int, timeout: float | None, field_name: str, what: str) -> None:
    """Tell the supervisor (if any) that a call into the user's code starts.

    Args:
        call_id: this call's number, unique in the process.
        timeout: its time limit in seconds (``audit.trial_timeout``), or None.
        field_name: the config field naming the code.
        what: the call, in words (``"the training function on trial 3 of 40 (seed 17)"``).
    """
    limit = "-" if timeout is None else repr(float(timeout))
    _send(f"call {call_id} {limit} {field_name} {' '.join(what.split())}")


def note_done(call_id: int) -> None:
    """Tell the supervisor (if any) that a call into the user's code returned or raised.

    Args:
        call_id: the number :func:`note_call` was given.
    """
    _send(f"done {call_id}")


def _send(line: str) -> None:
    if _channel is not None:
        with contextlib.suppress(OSError):  # a supervisor that is gone cannot be told; the command goes on
            os.write(_channel, (line[:3000] + "\n").encode("utf-8", "replace"))


@dataclass
class _Calls:
    """What the supervisor knows of the child: the calls into the user's code now running, and its exit code."""

    running: dict[str, tuple[float, float | None, str, str]] = field(default_factory=dict)
    exit_code: int | None = None
    exited_at: float | None = None  # when the exit code came (time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def read(self, fd: int) -> None:
        pending = b""
        while chunk := os.read(fd, 65536):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                self.take(line.decode("utf-8", "replace"))

    def take(self, line: str) -> None:
        kind, _, rest = line.partition(" ")
        with self.lock:
            if kind == "call":
                call_id, limit, name, what = (rest.split(" ", 3) + ["", "", ""])[:4]
                self.running[call_id] = (time.monotonic(), None if limit == "-" else float(limit), name, what)
            elif kind == "done":
                self.running.pop(rest, None)
            elif kind == "exit":
                self.exit_code, self.exited_at = int(rest), time.monotonic()

    def overdue(self) -> tuple[float, str, str] | None:
        """The first call past its time limit and the grace after it: (limit, field, what)."""
        now = time.monotonic()
        with self.lock:
            for start, limit, name, what in self.running.values():
                if limit is not None and now > start + limit + GRACE_SECONDS:
                    return limit, name, what
        return None

    def shutdown_hangs(self) -> bool:
        """Whether the child said its exit code more than :data:`SHUTDOWN_SECONDS` ago (the command is over; an
        exit handler that hangs must not keep the supervisor waiting)."""
        with self.lock:
            return self.exited_at is not None and time.monotonic() > self.exited_at + SHUTDOWN_SECONDS

    def inside_user_code(self) -> tuple[str, str] | None:
        with self.lock:
            for _, _, name, what in self.running.values():
                return name, what
        return None


def main() -> int:
    """``fdp-audit``: run the command of ``sys.argv`` in a supervised child (module docstring).

    Returns:
        The exit code the child gave; or 2 when it ended inside the user's code or was ended past its time limit,
        3 when it ended inside fdp-audit's code with status 0, 128 + N when signal N killed it.
    """
    import subprocess

    read_end, write_end = os.pipe()
    # the interpreter's own flags (-X dev, -W, -O, -I …) hold for the command as they would without a supervisor
    interpreter = [sys.executable, *subprocess._args_from_interpreter_flags()]
    child = subprocess.Popen([*interpreter, "-c", _CHILD, *sys.argv[1:]], pass_fds=(write_end,),
                             env={**os.environ, CHANNEL_VARIABLE: str(write_end), PARENT_VARIABLE: str(os.getpid())})
    os.close(write_end)
    calls = _Calls()
    reader = threading.Thread(target=calls.read, args=(read_end,), daemon=True)
    reader.start()

    forwarded: set[int] = set()  # a child killed by one of these was stopped by the user, not by its own code

    def forward(signum: int, frame: object) -> None:
        forwarded.add(signum)
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)

    # a terminal's Ctrl-C reaches the child too (one process group); the child ignores the copy (_interrupt)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)
    overdue = None
    while True:
        try:
            status = child.wait(timeout=1.0)
            break
        except subprocess.TimeoutExpired:
            overdue = calls.overdue()
            if overdue is not None or calls.shutdown_hangs():
                child.kill()
    reader.join(timeout=1.0)  # the child's last lines are in the pipe; a grandchild may hold it open
    if overdue is not None:
        limit, name, what = overdue
        return _error(f"audit.trial_timeout: {what} ({name}) ran past the limit of {limit:g} s and did not stop "
                      f"when interrupted; the command was ended after {GRACE_SECONDS:g} s more (no results were "
                      "written; the journal keeps the finished trials)", EXIT_BAD_INPUT)
    if calls.exit_code is not None:
        return calls.exit_code
    if status < 0 and -status in forwarded:
        return 128 - status
    inside = calls.inside_user_code()
    if inside is not None:
        name, what = inside
        how = f"was killed by signal {-status}" if status < 0 else f"ended the process (status {status})"
        return _error(f"{name}: {what} {how} instead of returning; no results were written", EXIT_BAD_INPUT)
    if status < 0:
        return 128 - status
    return status if status else _error("internal error: the command ended (status 0) before it finished; no "
                                        "results were written", EXIT_INTERNAL)


def _error(message: str, code: int) -> int:
    prefix = "fdp-audit: " if message.startswith("internal error") else "fdp-audit: error: "
    print(prefix + message, file=sys.stderr, flush=True)
    return code


def child() -> None:
    """The supervised command: ``fdp_audit.cli.main`` on the arguments, its exit code sent to the supervisor, then
    an exit that waits for no thread the user's code left running."""
    global _channel
    parent = os.environ.pop(PARENT_VARIABLE, None)
    if parent is not None:
        _die_with(int(parent))
    descriptor = os.environ.pop(CHANNEL_VARIABLE, None)
    if descriptor is not None:
        _channel = int(descriptor)
        os.set_inheritable(_channel, False)
    signal.signal(signal.SIGINT, _interrupt)
    from fdp_audit.cli import main as command

    try:
        code = command(sys.argv[1:])
    except SystemExit as stop:  # argparse's --help and --version
        code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    _send(f"exit {code}")
    stray = [t.name for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon
             and t.is_alive()]
    if stray:  # finalising would wait for them forever
        print(f"fdp-audit: note: {len(stray)} thread(s) left running ({', '.join(stray[:3])}) were stopped with the "
              "process", file=sys.stderr, flush=True)
        os._exit(code)
    sys.exit(code)


def _die_with(parent: int) -> None:
    """End this process when the supervisor dies: a supervisor killed by SIGKILL forwards nothing, and the command
    would go on writing results nobody waits for. Linux sends the child SIGKILL then (prctl PR_SET_PDEATHSIG); a
    supervisor that died before the request was made is seen as a changed parent process."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # 1: PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(128 + int(signal.SIGKILL))


def _interrupt(signum: int, frame: object) -> None:
    """SIGINT interrupts the command, except a copy arriving within :data:`DUPLICATE_SECONDS` of the last one: a
    terminal's Ctrl-C reaches both processes and the supervisor forwards its own, and the second copy would
    interrupt the command's handling of the first. A later Ctrl-C interrupts again (a cleanup that hangs)."""
    global _last_interrupt
    now = time.monotonic()
    if now - _last_interrupt < DUPLICATE_SECONDS:
        return
    _last_interrupt = now
    raise KeyboardInterrupt
