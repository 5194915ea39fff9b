"""The user's code in a config (docs/files.md, "The user's code"): each call gets copies of the audit's tensors, runs
with the working folder restored after it, under ``audit.trial_timeout`` with progress lines, and whatever it does
to the process (``os._exit``, a thread left running) cannot make an exit 0 without results. Each test reproduces
a defect found by a hostile probe and fails on the code before its fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

FACTORY = "from torch import nn\n\ndef make(n_inputs, n_classes):\n    return nn.Linear(n_inputs, n_classes)\n"
STEP = ("import torch\nimport torch.nn.functional as F\n\n"
        "def step(module, dataset):\n"
        "    optimizer = torch.optim.SGD(module.parameters(), lr=0.1)\n"
        "    x, y = dataset[:]\n"
        "    loss = F.cross_entropy(module(x), y)\n"
        "    optimizer.zero_grad()\n    loss.backward()\n    optimizer.step()\n\n")


def user_config(folder: Path, training: str, write_yaml, small_config, trials: int = 14, **audit) -> Path:
    """A config auditing ``def train(module, dataset, seed)`` (the source after :data:`STEP`) with the attribute
    game on 60 synthetic rows."""
    (folder / "model.py").write_text(FACTORY)
    (folder / "train.py").write_text(STEP + training)
    return write_yaml(folder / "c.yaml", small_config(
        "dp_sgd", rows=60, model={"kind": "module", "factory": "model.py:make"},
        mechanism={"training": "train.py:train", "steps": 2},
        audit={"trials": trials, "games": ["attribute"], "attacks": ["prior", "likelihood"], **audit}))


def supervised(argv: list[str | Path], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m fdp_audit ARGV`` as a user runs it: through the supervisor."""
    return subprocess.run([sys.executable, "-m", "fdp_audit", *map(str, argv)], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "FDP_AUDIT_PROGRESS": "0"})


def test_os_exit_in_the_users_code_is_not_a_pass(tmp_path: Path, write_yaml, small_config) -> None:
    """``os._exit(0)`` inside the training function ended ``fdp-audit audit`` with exit 0 and no results."""
    config = user_config(tmp_path, "def train(module, dataset, seed):\n    import os\n    os._exit(0)\n",
                         write_yaml, small_config)
    done = supervised(["audit", config, "--out", tmp_path / "out"], tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert lines[-1].startswith("fdp-audit: error: mechanism.training: the training function on trial 1 of")
    assert "ended the process (status 0)" in lines[-1] and not (tmp_path / "out" / "results.json").exists()


def test_a_thread_left_running_does_not_keep_the_command_alive(tmp_path: Path, write_yaml, small_config) -> None:
    """A training function that left a non-daemon thread running: PASS was printed and the process never exited."""
    config = user_config(tmp_path, "import threading, time\n\n"
                                   "def train(module, dataset, seed):\n"
                                   "    threading.Thread(target=time.sleep, args=(3600,), name='stray').start()\n"
                                   "    step(module, dataset)\n    return module\n", write_yaml, small_config)
    done = supervised(["audit", config, "--out", tmp_path / "out"], tmp_path, timeout=240)
    assert done.returncode == 0 and done.stdout.startswith("PASS"), done.stderr
    assert "thread(s) left running (stray" in done.stderr and (tmp_path / "out" / "results.json").is_file()


def test_a_hanging_trial_is_stopped_at_its_time_limit(cli, one_line_error, tmp_path: Path, write_yaml,
                                                      small_config) -> None:
    """A training function that hangs ran forever (no ``audit.trial_timeout``); now it is interrupted where it
    waits, and the refusal shows the user's frame."""
    config = user_config(tmp_path, "import time\n\ndef train(module, dataset, seed):\n    time.sleep(3600)\n",
                         write_yaml, small_config, trial_timeout=1.0)
    result = cli("audit", config, "--out", tmp_path / "out")
    line = one_line_error(result.err.splitlines()[-1])
    assert result.code == 2 and line.startswith("fdp-audit: error: audit.trial_timeout: the training function ran "
                                                "past the limit of 1 s on a trial (seed")
    assert ", in train\n    time.sleep(3600)" in result.err and not (tmp_path / "out").exists()


def test_slow_trials_say_how_far_they_are(cli, tmp_path: Path, write_yaml, small_config,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Trials of 3 s printed no progress line for a minute (the phase counted chunks of 32 trials). Now a line
    comes at least every LINE_SECONDS (here lowered to 0.5 s; trials of 0.3 s)."""
    from fdp_audit import user_calls

    monkeypatch.setattr(user_calls, "LINE_SECONDS", 0.5)
    monkeypatch.setenv("FDP_AUDIT_PROGRESS", "lines")
    config = user_config(tmp_path, "import time\n\ndef train(module, dataset, seed):\n    time.sleep(0.3)\n"
                                   "    step(module, dataset)\n    return module\n", write_yaml, small_config)
    result = cli("audit", config, "--out", tmp_path / "out")
    assert result.code == 0, result.err
    lines = [line for line in result.err.splitlines() if "fdp-audit: the training function: trial " in line]
    assert len(lines) >= 3, result.err


def test_a_change_of_working_folder_does_not_move_the_outputs(cli, tmp_path: Path, write_yaml, small_config,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A training function that called ``os.chdir`` put the results under its folder while the path printed was the
    old one."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    config = user_config(tmp_path, f"import os\n\ndef train(module, dataset, seed):\n    os.chdir({str(elsewhere)!r})\n"
                                   "    step(module, dataset)\n    return module\n", write_yaml, small_config)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    result = cli("audit", config, "--out", "out")
    assert result.code == 0, result.err
    assert Path.cwd() == work and (work / "out" / "results.json").is_file() and list(elsewhere.iterdir()) == []


def test_the_users_code_gets_copies_of_the_audits_tensors(tmp_path: Path, small_config) -> None:
    """A training function that edited its inputs in place corrupted the data of 62 of 63 later calls (and the
    built-in baselines' utility, 0.707 → 0.433); a third-party mechanism could do the same to the problem."""
    from fdp_audit.auditing.third_party import train_third_party
    from fdp_audit.auditing.user_training import train_user_trials, user_trainer
    from fdp_audit.config import config_from_dict
    from fdp_audit.data.prepare import prepare_data
    from fdp_audit.training.run import build_problem

    (tmp_path / "model.py").write_text(FACTORY)
    (tmp_path / "train.py").write_text(STEP + "SEEN = []\n\ndef train(module, dataset, seed):\n"
                                       "    x, y = dataset.tensors\n    SEEN.append(float(x[:10].sum()))\n"
                                       "    x.mul_(0.0)\n    step(module, dataset)\n    return module\n")
    raw = small_config("dp_sgd", rows=60, model={"kind": "module", "factory": f"{tmp_path / 'model.py'}:make"},
                       mechanism={"training": f"{tmp_path / 'train.py'}:train", "steps": 2})
    config = config_from_dict(raw)
    problem = build_problem(config, prepare_data(config.data, config.seed))
    original = problem.x.clone()
    trainer = user_trainer(config, problem)
    canaries = _record_canaries(problem, 6)
    list(train_user_trials(trainer, 0, torch.arange(6), canaries, False))
    seen = sys.modules[trainer.training.__module__].SEEN
    assert len(seen) == 6 and len(set(seen)) == 1 and seen[0] != 0.0
    torch.testing.assert_close(problem.x, original, rtol=0, atol=0)
    assert torch.equal(trainer.x, original)

    sums = []

    def editing(problem, seed, canary):
        sums.append(float(problem.x.sum()))
        problem.x.mul_(0.0)
        canary.x.mul_(0.0)
        return {name: torch.zeros(shape) for name, shape in problem.model.shapes().items()}

    list(train_third_party(editing, problem, 0, torch.arange(4), canaries, False))
    assert len(set(sums)) == 1 and sums[0] != 0.0 and torch.equal(problem.x, original)
    assert torch.count_nonzero(canaries.x) > 0


def _record_canaries(problem, count: int):
    from fdp_audit.training.engine import Canaries

    x = problem.x[:count].clone()
    flags = torch.ones(count, dtype=torch.bool)
    return Canaries(x, problem.y[:count].clone(), flags, flags)


def test_a_fresh_module_returned_instead_of_the_trained_one_is_refused(cli, one_line_error, tmp_path: Path,
                                                                       write_yaml, small_config) -> None:
    """A training function that returned a fresh, untrained module passed the final-model games: the audit judged
    weights that no training produced."""
    config = user_config(tmp_path, "import copy\n\ndef train(module, dataset, seed):\n"
                                   "    fresh = copy.deepcopy(module)\n    step(module, dataset)\n    return fresh\n",
                         write_yaml, small_config)
    result = cli("audit", config, "--out", tmp_path / "out")
    assert result.code == 2
    assert "must return the module it was given, trained (it returned another module)" in one_line_error(result.err)


def test_os_exit_in_the_model_factory_is_bad_input(tmp_path: Path, write_yaml, small_config) -> None:
    """``os._exit(0)`` in the model factory, called outside the supervised calls of the trials, was reported as an
    internal error (exit 3)."""
    config = user_config(tmp_path, "def train(module, dataset, seed):\n    step(module, dataset)\n    return module\n",
                         write_yaml, small_config)
    (tmp_path / "model.py").write_text("import os\n\ndef make(n_inputs, n_classes):\n    os._exit(0)\n")
    done = supervised(["audit", config, "--out", tmp_path / "out"], tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert lines[-1].startswith("fdp-audit: error: model.factory: the model factory ended the process (status 0)")


@pytest.mark.parametrize(("hangs_from_call", "where"), [(1, ""), (2, " on a trial (seed")])
def test_a_hanging_model_factory_is_stopped_at_the_trials_time_limit(cli, one_line_error, tmp_path: Path, write_yaml,
                                                                    small_config, hangs_from_call, where) -> None:
    """The training function had ``audit.trial_timeout`` and the model factory none: a factory that hangs (from its
    first call, when the problem is built, or from a later one, inside a trial) ran forever. Now every call of it is
    under the same limit, and the refusal shows the user's frame."""
    config = user_config(tmp_path, "def train(module, dataset, seed):\n    step(module, dataset)\n    return module\n",
                         write_yaml, small_config, trial_timeout=1.0)
    (tmp_path / "model.py").write_text(
        "import time\nfrom torch import nn\n\nCALLS = []\n\n"
        "def make(n_inputs, n_classes):\n    CALLS.append(1)\n"
        f"    if len(CALLS) >= {hangs_from_call}:\n        time.sleep(3600)\n"
        "    return nn.Linear(n_inputs, n_classes)\n")
    result = cli("audit", config, "--out", tmp_path / "out")
    line = one_line_error(result.err.splitlines()[-1])
    assert result.code == 2 and line.startswith("fdp-audit: error: audit.trial_timeout: the model factory ran past "
                                                f"the limit of 1 s{where}"), result.err
    assert ", in make\n    time.sleep(3600)" in result.err and not (tmp_path / "out").exists()
