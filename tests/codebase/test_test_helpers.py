"""The tests' shared helpers live in one place: the log's path (`db`) and the factory in
tests/conftest.py, the people and the responders (`alice`, `ALICE`, `echo`) in tests/chat.py.
No other module under tests/ defines them again at its top level, except the local variants
listed in ALLOWED, each of which holds something the shared one does not (the reason is given).
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
SHARED = {"chat.py", "conftest.py"}  # the shared helper module and every folder's conftest
NAMES = {"db", "alice", "echo", "ALICE"}

ALLOWED = {
    # tests/engine/test_keeper.py is timing-sensitive and its body is edited by others: its uses of
    # ALICE (Alice's DM with message id m1, no user name) stay; it is defined as alice("m1").
    ("engine/test_keeper.py", "ALICE"),
    # `db` fixtures that hold a log already written to, not an empty path:
    ("storage/test_chain.py", "db"),  # three sealed turns, a Path for the sqlite3 helpers
    ("storage/test_chain_sealed_on_write.py", "db"),  # turns 1-3, a Path for the raw-file helpers
    ("projections/test_projection_runner.py", "db"),  # a fresh copy of the module's filled log
    ("projections/test_search.py", "db"),  # the Telegram and Slack conversations searched
    ("projections/test_verify_doctor.py", "db"),  # two conversations, a suspension, caught-up views
    ("projections/test_verify_tampered_event.py", "db"),  # the demo log, a Path the tests tamper with
    ("cli/test_export_output_file.py", "db"),  # one answered message to export
    ("cli/test_io_errors.py", "db"),  # one routed message, a Path whose bytes are hashed
    ("cli/test_reads_write_nothing.py", "db"),  # one routed message, caught-up views, a Path
    ("hermes/test_hermes_export_links.py", "db"),  # module-scoped: the fixture Hermes home imported
    ("web/test_web_attributes.py", "db"),  # module-scoped: the web log plus an odd session id
    ("web/test_web_bounded.py", "db"),  # the web log, with tempfile's folder moved under tmp_path
    # web_db.py builds the web tests' log: its alice has the user name "<b>alice</b>", so pages
    # are seen to escape it; not the chat.py source.
    ("web_db.py", "alice"),
}


def definitions(source: str, path: str = "<source>") -> list[tuple[str, int]]:
    """The top-level functions, fixtures and assignments in `source` named one of NAMES."""
    found = []
    for node in ast.parse(source, path).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = [node.name]
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        else:
            continue
        found += [(name, node.lineno) for name in names if name in NAMES]
    return found


def tree_definitions(root: Path = TESTS) -> dict[tuple[str, str], int]:
    """Every such definition under `root` outside the shared modules: (path, name) -> line."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        if path.name in SHARED or ".venv" in path.parts:
            continue
        rel = path.relative_to(root).as_posix()
        for name, line in definitions(path.read_text(encoding="utf-8"), rel):
            found[(rel, name)] = line
    return found


def test_no_test_module_redefines_a_shared_helper():
    found = tree_definitions()
    extra = [f"tests/{path}:{line}: defines {name} (import it from chat.py / use conftest's)"
             for (path, name), line in sorted(found.items()) if (path, name) not in ALLOWED]
    assert extra == []


def test_every_allowed_local_variant_still_exists():
    assert sorted(ALLOWED - tree_definitions().keys()) == []


def test_the_check_sees_a_planted_fixture_function_and_constant(tmp_path):
    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "test_planted.py").write_text(
        "import pytest\n"
        "from turnlog import SessionSource\n\n"
        "@pytest.fixture\ndef db(tmp_path):\n    return tmp_path / 'x.db'\n\n"
        "def echo(history, item):\n    return item.text\n\n"
        "async def alice():\n    pass\n\n"
        "ALICE: SessionSource = SessionSource(platform='telegram', chat_id='42')\n\n"
        "def test_x(db):\n    def alice():\n        pass\n")
    (tmp_path / "conftest.py").write_text("def db():\n    pass\n")
    assert tree_definitions(tmp_path) == {("engine/test_planted.py", "db"): 5, ("engine/test_planted.py", "echo"): 8,
                                          ("engine/test_planted.py", "alice"): 11,
                                          ("engine/test_planted.py", "ALICE"): 14}
