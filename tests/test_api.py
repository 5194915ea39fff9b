"""The public Python API (fdp_audit/api.py, docs/api.md): the walk-through of docs/api.md runs as written, from an
empty folder; a configuration built with functions audits exactly as the same configuration naming files; results
are written all together or not at all; the command line starts without the heavy libraries."""

from __future__ import annotations

import inspect
import json
import pydoc
import re
import subprocess
import sys
from pathlib import Path

import pytest

import fdp_audit
from fdp_audit.api import AuditResult, as_config, shipped_config_path
from fdp_audit.errors import BadInputError
from fdp_audit.user_code import load_function

ROOT = Path(__file__).resolve().parents[1]
API_DOC = ROOT / "docs" / "api.md"
EXAMPLE = ROOT / "examples" / "plain_dp_sgd"
HEAVY = ("torch", "scipy", "sklearn", "matplotlib", "dp_accounting", "jinja2", "numpy", "statsmodels")


def walkthrough_cells(text: str) -> list[str]:
    """The ``python`` blocks of a document, in order."""
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_the_cell_finder_finds_python_blocks_only():
    assert walkthrough_cells("```python\na = 1\n```\n```sh\nno\n```\n```python\nb = 2\n```") == ["a = 1\n", "b = 2\n"]


# The walk-through's cells, run in one namespace as a notebook's are, by a fresh interpreter.
_RUN_CELLS = r"""
import json, sys
namespace = {"__name__": "__main__"}
for index, cell in enumerate(json.loads(sys.argv[1])):
    exec(compile(cell, f"docs/api.md cell {index}", "exec"), namespace)
import fdp_audit
print(fdp_audit.__file__)
"""


@pytest.mark.slow
def test_the_walkthrough_runs_as_written_from_an_empty_folder(tmp_path):
    """A fresh interpreter started in an empty folder outside the checkout (so ``configs/adult_fdp.yaml`` is not a
    path from the working folder, and ``fdp_audit`` is the installed package) runs the cells as written; they
    assert what the text says (ε = 4.376, PASS on the shipped Adult config at 64 trials, which is
    ``python -c "import fdp_audit; r = fdp_audit.audit('configs/adult_fdp.yaml', trials=64); print(r.verdict)"``,
    PASS of the hand-written DP-SGD given as functions)."""
    cells = walkthrough_cells(API_DOC.read_text(encoding="utf-8"))
    assert len(cells) >= 8 and any('fdp_audit.audit("configs/adult_fdp.yaml", trials=64)' in cell for cell in cells)
    done = subprocess.run([sys.executable, "-c", _RUN_CELLS, json.dumps(cells)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "PASS - " in done.stdout and not Path(done.stdout.split()[-1]).is_relative_to(tmp_path)
    assert (tmp_path / "reports" / "adult" / "junit.xml").is_file()


def make_model(n_inputs, n_classes):
    """``examples/plain_dp_sgd/model.py``'s factory, called from a function of this module."""
    return load_function(f"{EXAMPLE}/model.py:make_model", "test")(n_inputs, n_classes)


def train(model, dataset, seed):
    """``examples/plain_dp_sgd/train.py``'s loop, called from a function of this module."""
    return load_function(f"{EXAMPLE}/train.py:train", "test")(model, dataset, seed)


@pytest.mark.slow
def test_functions_instead_of_file_names_give_the_same_audit():
    """``configs/plain_dp_sgd.yaml`` names its model factory and training loop by file; the same configuration
    built in Python with the functions gives the same comparisons, number for number."""
    by_name = fdp_audit.audit("configs/plain_dp_sgd.yaml", trials=64)
    raw = by_name.to_dict()["reproducibility"]["config"]
    raw["model"]["factory"], raw["mechanism"]["training"] = make_model, train
    by_function = fdp_audit.audit(raw, trials=64)
    assert by_function.to_dict()["comparisons"] == by_name.to_dict()["comparisons"]
    assert by_function.verdict == by_name.verdict == "PASS"
    assert by_function.to_dict()["reproducibility"]["config"]["model"]["factory"] == "tests.test_api:make_model"


def test_shipped_configs_are_found_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert shipped_config_path("configs/adult_fdp.yaml").is_file()
    assert shipped_config_path("adult_fdp.yaml") == shipped_config_path("configs/adult_fdp.yaml")
    assert as_config("configs/adult_fdp.yaml").name == "adult_fdp"
    with pytest.raises(BadInputError, match="no_such.yaml"):
        as_config("configs/no_such.yaml")
    with pytest.raises(BadInputError):
        as_config(3)


def test_overrides_are_checked_and_named_by_the_keyword(tmp_path):
    with pytest.raises(BadInputError) as error:
        fdp_audit.audit("configs/adult_fdp.yaml", trials=0)
    assert error.value.field == "trials"
    with pytest.raises(BadInputError) as error:
        fdp_audit.audit("configs/adult_fdp.yaml", games=["no_such_game"], out_dir=tmp_path / "refused")
    assert error.value.field == "games" and "no_such_game" in str(error.value) and not (tmp_path / "refused").exists()


def test_a_result_that_judged_nothing_is_never_handed_out():
    with pytest.raises(BadInputError, match="nothing"):
        AuditResult({"verdict": {"status": "NOT JUDGED", "explanation": "nothing was judged"}})


def test_writing_is_all_or_nothing(tmp_path):
    from fdp_audit.config import config_from_dict
    from tests.conftest import small_config

    result = fdp_audit.audit(config_from_dict(small_config("dp_sgd")))
    written = result.write(tmp_path / "out")
    saved = json.loads(written.results.read_text(encoding="utf-8"))
    assert saved["verdict"] == result.to_dict()["verdict"] and written.junit.is_file()
    assert [row["id"] for row in result.comparisons] == [row["id"] for row in saved["comparisons"]]
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "report.html").mkdir()  # the report cannot be written: neither can the results
    with pytest.raises(OSError):
        result.write(blocked)
    assert sorted(path.name for path in blocked.iterdir()) == ["report.html"]
    with pytest.raises(BadInputError, match="folder"):
        result.write()


def test_account_takes_parameters_or_a_config():
    assert fdp_audit.account(1.0, 1 / 16, 100) is fdp_audit.account(1.0, 1 / 16, 100)
    assert fdp_audit.account(config="configs/adult_fdp.yaml").spec.name == "fdp_sgd"
    with pytest.raises(BadInputError):
        fdp_audit.account(1.0, 1 / 16)
    with pytest.raises(BadInputError):
        fdp_audit.account(1.0, 1 / 16, 100, config="configs/adult_fdp.yaml")


def test_the_public_names_show_the_signatures_and_docstrings_of_what_they_call():
    """``help(fdp_audit.audit)`` or ``fdp_audit.audit?`` in a notebook shows the call, not ``(*args, **kwargs)``."""
    from fdp_audit import api

    for name in ("audit", "audit_checkpoint", "account", "AuditResult"):
        public, real = getattr(fdp_audit, name), getattr(api, name)
        assert inspect.signature(public) == inspect.signature(real), name
        assert inspect.getdoc(real) in inspect.getdoc(public), name
    assert "trials" in inspect.signature(fdp_audit.audit).parameters
    assert pydoc.render_doc(fdp_audit.audit).count("Play the configured audit games") == 1


def test_the_package_and_the_command_line_start_without_the_heavy_libraries():
    """``import fdp_audit``, reading the public names' signatures and docstrings, and building every command's
    parser (what ``--help`` and ``--version`` do) import none of the libraries that cost seconds: each command
    imports what it needs when it runs."""
    code = ("import inspect, sys, fdp_audit, fdp_audit.auditing; from fdp_audit.cli import build_parser; "
            "build_parser(); "
            "[(inspect.signature(getattr(fdp_audit, n)), getattr(fdp_audit, n).__doc__) "
            "for n in ('audit', 'audit_checkpoint', 'account', 'AuditResult')]; "
            f"print([name for name in {HEAVY!r} if name in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == "[]"
    version = subprocess.run([sys.executable, "-m", "fdp_audit", "--version"], capture_output=True, text=True,
                             check=True, cwd=ROOT)
    assert version.stdout.strip() == f"fdp-audit {fdp_audit.__version__}"


def test_audit_is_the_api_function_whatever_was_imported_first():
    """``fdp_audit.audit`` is a plain function, not a package: importing the audits' package
    (:mod:`fdp_audit.auditing`) binds no other object to the name."""
    import fdp_audit.auditing.gate
    from fdp_audit import api

    assert fdp_audit.audit is api.audit and inspect.isfunction(fdp_audit.audit)
    with pytest.raises(BadInputError):
        fdp_audit.audit("configs/no_such.yaml")


def test_the_commands_library_calls_name_their_keywords_in_bad_input():
    """``calibrate``, ``report``, ``train``, ``profile`` and ``corrdp`` are library calls first: bad input names the
    keyword (the command line names its flag instead), and calibrating gives what ``calibrate --json`` prints."""
    from fdp_audit import api

    found = api.calibrate(2.0, 1e-5, 0.05, 100)
    assert found["achieved_epsilon"] <= 2.0 and found["parameters"]["steps"] == 100
    for call, keyword in ((lambda: api.calibrate(2.0, 1e-5, 0.05), "steps"),
                          (lambda: api.calibrate(2.0, 1e-5, 0.05, 100, noise_multiplier=1.0), "steps"),
                          (lambda: api.calibrate(-1.0, 1e-5, 0.05, 100), "epsilon"),
                          (lambda: api.corrdp("nothing", "configs/adult_fdp.yaml"), "action"),
                          (lambda: api.report(ROOT / "configs", ROOT / "configs"), "output")):
        with pytest.raises(BadInputError) as raised:
            call()
        assert raised.value.field == keyword


def test_a_one_run_result_names_each_tests_epsilon_lower_bound():
    """The count test's ε (valid for any mechanism meeting the curve) and the conformance test's (valid if the
    training behaves as the claimed DP-SGD) are two keys, never one standing for the other."""
    one_run = {"empirical_epsilon": 0.9, "epsilon_order_statistics": 1.6}
    result = AuditResult({"verdict": {"status": "PASS", "explanation": "no test rejects"}, "one_run": one_run})
    assert result.epsilon_lower_bounds == {"one-run": 0.9, "one-run-conformance": 1.6}
    counted = AuditResult({"verdict": {"status": "PASS", "explanation": "no test rejects"},
                           "one_run": {"empirical_epsilon": 0.9, "epsilon_order_statistics": None}})
    assert counted.epsilon_lower_bounds == {"one-run": 0.9}
