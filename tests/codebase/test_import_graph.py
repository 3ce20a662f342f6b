"""turnlog's modules import each other without cycles (issue 14): every module is parsed, its
imports resolved (relative ones too, and `from package import module`), and the graph searched.

Imports under `if TYPE_CHECKING:` are left out: they exist for annotations only and never run.
Imports inside functions are counted: a late import is still a dependency. So are imports by
name (`importlib.import_module`, `__import__`): in a module that makes them, every string naming a
turnlog module counts as an edge to it, since the name may reach the call through a variable.
"""

from __future__ import annotations

import ast
from pathlib import Path

import turnlog

ROOT = Path(turnlog.__file__).parent


def module_name(path: Path, top: Path = ROOT.parent) -> str:
    parts = list(path.relative_to(top).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in ROOT.rglob("*.py")}


def _type_checking_only(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if _type_checking_only(node):
            for child in getattr(node, "orelse", []):
                visit(child)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)
    visit(tree)
    return found


def _imports_by_name(tree: ast.AST, package: str) -> set[str]:
    """Module names a module may import through importlib: none unless it calls import_module or
    __import__; then every string constant that reads as a module name (relative ones resolved)."""
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and (getattr(n.func, "id", None) or getattr(n.func, "attr", None)) in ("import_module", "__import__")]
    if not calls:
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if text.startswith("."):
                dots = len(text) - len(text.lstrip("."))
                base = package.split(".")
                text = ".".join(base[: len(base) - (dots - 1)] + [text.lstrip(".")])
            names.add(text)
    return names


def edges(known: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(), str(path))
        targets: set[str] = _imports_by_name(tree, package)
        for node in _imports(tree):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
                continue
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            targets.add(stem)
            targets.update(f"{stem}.{a.name}" for a in node.names)  # `from pkg import module`
        graph[name] = {t for t in targets if t in known and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strongconnect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return found


def test_the_graph_finds_a_cycle_when_there_is_one():
    graph = edges(modules())
    assert "turnlog.api" in graph["turnlog"]  # `from .api import ...` in the package's __init__
    graph["turnlog.domain.keys"] = graph["turnlog.domain.keys"] | {"turnlog.api"}
    assert any("turnlog.domain.keys" in c and "turnlog.api" in c for c in cycles(graph))


def test_an_import_by_name_is_an_edge(tmp_path):
    # The shape turnlog/cli.py once had: the group loaded its command modules by name, hiding a cycle.
    package = tmp_path / "turnlog"
    (package / "web").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "web" / "__init__.py").write_text("")
    (package / "cli.py").write_text(
        "import importlib\n"
        "MODULES = ('turnlog.cli_audit', '.web.cli')\n"
        "def load():\n"
        "    for name in MODULES:\n"
        "        importlib.import_module(name, 'turnlog')\n")
    (package / "cli_audit.py").write_text("from .cli import load\n")
    (package / "web" / "cli.py").write_text("from ..cli import load\n")
    known = {module_name(p, tmp_path): p for p in package.rglob("*.py")}
    graph = edges(known)
    assert {"turnlog.cli_audit", "turnlog.web.cli"} <= graph["turnlog.cli"]
    assert sorted(map(sorted, cycles(graph))) == [["turnlog.cli", "turnlog.cli_audit", "turnlog.web.cli"]]


def test_turnlog_has_no_import_cycles():
    graph = edges(modules())
    # A package imports its own modules; a module importing its package's __init__ is not a cycle
    # of substance (turnlog/__init__.py re-exports the API), so only module-to-module edges count.
    graph = {m: {t for t in ts if not modules()[t].name == "__init__.py"} for m, ts in graph.items()}
    assert cycles(graph) == []
