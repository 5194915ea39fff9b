"""The command line's supervisor (:mod:`fdp_audit.supervision`): the real supervisor and the real child, with the
command the child runs replaced by a small one that enters the user's code and waits there (an audit would take
seconds to get that far, and the supervision is the same)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# in the child: fdp_audit.cli.main replaced by a command that enters "the training function", writes its pid to the
# file it is given and sleeps
WAITING_IN_USER_CODE = (
    "import os, pathlib, time, fdp_audit.cli as cli, fdp_audit.supervision as s\n"
    "def command(argv):\n"
    "    s.note_call(1, None, 'mechanism.training', 'the training function on trial 1 of 1')\n"
    "    pathlib.Path(argv[0]).write_text(str(os.getpid()))\n"
    "    time.sleep(120)\n"
    "    return 0\n"
    "cli.main = command\n")


def supervisor(child_source: str, *argv: str | Path) -> subprocess.Popen:
    """``fdp-audit ARGV`` whose child runs ``child_source`` before :func:`fdp_audit.supervision.child`."""
    source = "import fdp_audit.supervision as s\n" + child_source + "s.child()"
    # a runner started under nohup ignores SIGHUP, and an ignored signal stays ignored in every child it starts:
    # the command is started as a terminal starts it, with SIGHUP's default action
    program = (f"import signal, sys, fdp_audit.supervision as s\nsignal.signal(signal.SIGHUP, signal.SIG_DFL)\n"
               f"s._CHILD = {source!r}\nsys.exit(s.main())\n")
    return subprocess.Popen([sys.executable, "-c", program, *map(str, argv)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def child_pid(marker: Path, timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    while not (marker.exists() and marker.read_text()):
        assert time.monotonic() < deadline, "the child never entered the user's code"
        time.sleep(0.05)
    return int(marker.read_text())


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_killed_supervisor_takes_the_command_with_it(tmp_path: Path) -> None:
    """SIGKILL of the supervisor alone left the audit running 8½ minutes, writing results."""
    marker = tmp_path / "pid"
    process = supervisor(WAITING_IN_USER_CODE, marker)
    pid = child_pid(marker)
    try:
        os.kill(process.pid, signal.SIGKILL)
        process.communicate(timeout=30)
        deadline = time.monotonic() + 5.0
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(pid), "the child outlived its supervisor"
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_sent_to_the_supervisor_is_not_blamed_on_the_users_code(tmp_path: Path, signum: int) -> None:
    """SIGTERM or SIGHUP forwarded during the user's code was reported as bad input: exit 2, "mechanism.training:
    the training function … was killed by signal 15"."""
    marker = tmp_path / "pid"
    process = supervisor(WAITING_IN_USER_CODE, marker)
    child_pid(marker)
    process.send_signal(signum)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 128 + signum and "mechanism.training" not in err, err


def test_a_second_ctrl_c_interrupts_a_hanging_cleanup(tmp_path: Path) -> None:
    """The child ignored every SIGINT after the first, so a cleanup that hung could not be interrupted; the copy of
    one Ctrl-C (the terminal's, beside the supervisor's) must still not interrupt the cleanup it started."""
    marker = tmp_path / "pid"
    cleanup = ("    try:\n        time.sleep(120)\n    except KeyboardInterrupt:\n"
               "        pathlib.Path(argv[0] + '.interrupted').touch()\n    time.sleep(120)\n")
    process = supervisor(WAITING_IN_USER_CODE.replace("    time.sleep(120)\n", cleanup), marker)
    pid = child_pid(marker)
    try:
        process.send_signal(signal.SIGINT)
        os.kill(pid, signal.SIGINT)  # the terminal's copy, to the whole process group
        deadline = time.monotonic() + 30
        while not Path(f"{marker}.interrupted").exists():
            assert time.monotonic() < deadline and process.poll() is None, process.communicate()[1]
            time.sleep(0.05)
        time.sleep(0.5)
        assert process.poll() is None, "the copy of one Ctrl-C interrupted the command's cleanup"
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
        assert process.returncode == 128 + signal.SIGINT, err
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_the_interpreters_flags_reach_the_command() -> None:
    """The child was started as ``python -c …``: ``python -X importtime -m fdp_audit`` timed the supervisor's
    imports only, and -W, -X dev or -O did not hold for the command."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-W", "error::UserWarning", "-c",
                           "import sys, fdp_audit.supervision as s\n"
                           "s._CHILD = 'import warnings; print(warnings.filters[0][:3:2]);"
                           " ' + s._CHILD\n"
                           "sys.exit(s.main())", "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "fdp_audit.cli" in done.stderr and "('error', <class 'UserWarning'>)" in done.stdout, done.stdout


def test_a_shutdown_that_hangs_after_the_exit_code_does_not_keep_the_command_alive() -> None:
    """An exit handler that hung after the child had said its exit code kept the supervisor waiting forever."""
    start = time.monotonic()
    process = supervisor("import atexit, time\natexit.register(time.sleep, 120)\n", "--version")
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0 and out.startswith("fdp-audit"), err
    assert time.monotonic() - start < 30


def test_the_installed_command_is_the_supervisor() -> None:
    """``fdp-audit`` must start the supervisor, not the command itself: the exit codes above hold only there."""
    from importlib.metadata import entry_points

    scripts = {point.name: point.value for point in entry_points(group="console_scripts") if point.name == "fdp-audit"}
    assert scripts == {"fdp-audit": "fdp_audit.supervision:main"}
