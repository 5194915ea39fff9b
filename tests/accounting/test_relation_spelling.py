"""One spelling of the neighbouring relation: ``Relation`` (fdp_audit/accounting/events.py) in code and results
files; the older hyphenated spelling is read at one boundary only, ``relation_named``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import fdp_audit
from fdp_audit.accounting.events import RELATIONS, Relation, relation_named
from fdp_audit.errors import BadInputError

PACKAGE = Path(fdp_audit.__file__).parent
OLD_SPELLING = "add" + "-remove"  # split so that this file is not a hit of the search it makes
BOUNDARY = PACKAGE / "accounting" / "events.py"


def test_the_older_spelling_appears_only_in_the_translation_that_reads_it():
    hits = [f"{path.relative_to(PACKAGE)}:{number}" for path in sorted(PACKAGE.rglob("*.py")) if path != BOUNDARY
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if OLD_SPELLING in line]
    assert hits == []
    assert OLD_SPELLING in BOUNDARY.read_text(encoding="utf-8")


def test_both_spellings_read_as_the_one_relation_and_nothing_else_does():
    assert relation_named(OLD_SPELLING) is relation_named("add_remove") is Relation.ADD_REMOVE
    assert relation_named("replace") is Relation.REPLACE
    assert RELATIONS == (Relation.ADD_REMOVE, Relation.REPLACE)
    for bad in ("add/remove", "remove", None, 1):
        with pytest.raises(BadInputError):
            relation_named(bad)


def test_a_relation_is_written_as_results_files_store_it():
    assert json.dumps({"relation": Relation.ADD_REMOVE}) == '{"relation": "add_remove"}'
    assert f"{Relation.REPLACE}" == "replace" and Relation.ADD_REMOVE.words == "add/remove"


def test_the_older_spelling_is_accepted_where_a_user_gives_a_relation():
    assert fdp_audit.account(1.0, 0.01, 100, relation=OLD_SPELLING).relation is Relation.ADD_REMOVE
