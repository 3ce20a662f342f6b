"""The faces (the `turnlog` command in turnlog/cli/, the web viewer in turnlog/web/, the bot-library
adapters in turnlog/integrations/) reach the
engine only through the public package: names in `turnlog.__all__`, their own modules, and
anything outside turnlog. Every import counts, those under `if TYPE_CHECKING:` and inside
functions too: a face that names an internal type depends on it all the same."""

from __future__ import annotations

import ast
from pathlib import Path

import turnlog

ROOT = Path(turnlog.__file__).parent

# Programs the CLI runs as commands, each built on the engine: `turnlog ingest`, `bench`, `demo`,
# and `web`, which serves the other face.
CLI_RUNS = {"turnlog.ingest", "turnlog.bench", "turnlog.bench_concurrent", "turnlog.demo", "turnlog.web.app"}

# What the web viewer still imports from inside the engine. The list may only shrink: a new
# entry fails, and so does an entry the viewer no longer needs (delete it here).
WEB_KNOWN = {
    ("turnlog.web.plot", "turnlog.bench"),
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(path: Path) -> list[tuple[str, str | None]]:
    """(module, name) for every import of the file, relative ones resolved; name is None for
    `import module` and for `from module import *`."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found += [(module, None if alias.name == "*" else alias.name) for alias in node.names]
    return found


def violations(face: str, allowed: set[str]) -> set[tuple[str, str]]:
    """(importing module, what it reached) for each import of the face's modules that is not the
    public package, the face itself, an allowed module, or outside turnlog."""
    public = set(turnlog.__all__) | {"open"}
    found = set()
    for path in sorted((ROOT / face).rglob("*.py")):
        importer = _module_name(path)
        for module, name in imported(path):
            if module == "turnlog":
                if name not in public:  # a submodule (`from .. import api`) or a private name
                    found.add((importer, f"turnlog.{name}"))
                continue
            target = f"{module}.{name}" if name is not None and f"{module}.{name}" in allowed else module
            own = target == f"turnlog.{face}" or target.startswith(f"turnlog.{face}.")
            if not target.startswith("turnlog.") or own or target in allowed:
                continue
            found.add((importer, target))
    return found


def test_the_cli_imports_only_the_public_package() -> None:
    found = violations("cli", CLI_RUNS)
    assert not found, "turnlog/cli/ reaches inside the engine (use or add a public name in turnlog/__init__.py): " + \
        ", ".join(f"{a} imports {b}" for a, b in sorted(found))


def test_the_web_viewer_reaches_inside_no_more_than_it_did() -> None:
    found = violations("web", set())
    new = found - WEB_KNOWN
    assert not new, "turnlog/web/ newly reaches inside the engine: " + \
        ", ".join(f"{a} imports {b}" for a, b in sorted(new))
    gone = WEB_KNOWN - found
    assert not gone, "no longer needed, delete from WEB_KNOWN: " + ", ".join(f"{a} -> {b}" for a, b in sorted(gone))


def test_the_bot_adapters_import_only_the_public_package() -> None:
    found = violations("integrations", {"turnlog.aio"})
    assert not found, "turnlog/integrations/ reaches inside the engine (use or add a public name): " + \
        ", ".join(f"{a} imports {b}" for a, b in sorted(found))


def test_importing_turnlog_imports_no_bot_library() -> None:
    import subprocess
    import sys
    code = ("import sys, turnlog; "
            "print(sorted(m for m in ('telegram', 'discord', 'slack_bolt', 'slack_sdk') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
