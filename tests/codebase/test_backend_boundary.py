"""Which backend stores the log is asked in one place: outside turnlog/storage/, no code compares
a kind with "sqlite" or "postgres" (`location.kind == "sqlite"`), and nowhere does code guess the
backend by probing a recorder for a `datastore` (`getattr(recorder, "datastore", None)`): what
differs between the backends is a method of storage/backend.py's Backend."""

from __future__ import annotations

import ast
from pathlib import Path

import turnlog

ROOT = Path(turnlog.__file__).parent
BACKEND_NAMES = {"sqlite", "postgres", "postgresql"}


def violations(source: str, path: str = "<source>", *, in_storage: bool = False) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source, path)):
        if isinstance(node, ast.Compare) and not in_storage and any(
                isinstance(o, ast.Constant) and str(o.value).lower() in BACKEND_NAMES
                for o in (node.left, *node.comparators)):
            found.append(f"{path}:{node.lineno}: asks which backend it has")
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("getattr", "hasattr") and any(
                isinstance(a, ast.Constant) and a.value == "datastore" for a in node.args):
            found.append(f"{path}:{node.lineno}: probes for a datastore")
    return found


def tree_violations() -> list[str]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT)
        found += violations(path.read_text(), str(relative), in_storage=relative.parts[0] == "storage")
    return found


def test_no_code_outside_storage_asks_which_backend_it_has():
    assert tree_violations() == []


def test_the_check_catches_a_planted_kind_test_and_a_datastore_probe():
    planted = (
        'if location.kind == "sqlite":\n    pass\n'
        'if "postgres" != backend.kind:\n    pass\n'
        'store = getattr(recorder, "datastore", None)\n'
        'if item.kind == WAKEUP:\n    pass\n'  # an inbox item's kind is no backend
    )
    assert violations(planted, "planted.py") == ["planted.py:1: asks which backend it has",
                                                 "planted.py:3: asks which backend it has",
                                                 "planted.py:5: probes for a datastore"]
    assert violations(planted, "storage/x.py", in_storage=True) == ["storage/x.py:5: probes for a datastore"]
