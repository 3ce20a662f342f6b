"""The layers of docs/architecture.md, and the privacy of every module's `_names`, checked on the
source: each module's imports (type-only ones included) against what its layer may import, and
every `x._name` against the names its own module defines.

    domain       pure rules and aggregates        -> errors
    storage      how events are stored            -> domain, errors
    projections  read models and their views      -> storage, domain, errors, base
    commands     decide and save events           -> projections, storage, domain, errors, base
    hermes       import and export of Hermes      -> commands, projections, storage, domain, errors, base, services
    services     time travel, export, upkeep      -> commands, projections, storage, domain, errors, base
    api          the public API (api, its groups, the agent cache and its memory readers)
                                                   -> everything below the faces
    tools        ingest, bench(_concurrent), demo, workload -> the public API
    cli, web     the faces                        -> the public API, tools (and cli -> web, to serve it)
    integrations the bot-library adapters, a face -> the public API, tools

`base` is the few top-level modules every layer above the pure core may use (clock, config, the
garbage-collector pause); the public API is the `turnlog` package, `api`, `aio`, `errors`.
"""

from __future__ import annotations

import ast
from pathlib import Path

from test_import_graph import ROOT, edges, module_name, modules

BASE = {"clock", "config", "gc_pause", "gc_turns", "logs"}
SERVICES = {"timetravel", "export", "maintenance", "metrics"}
TOOLS = {"ingest", "bench", "bench_concurrent", "demo", "workload", "search_timing"}
API = {"api", "turn_operations", "gateway_status", "agent_cache", "memory", "deprecated_names", "data_lifecycle", "closing"}
PUBLIC = {"turnlog", "api", "aio", "errors"}
BELOW_FACES = {"domain", "storage", "projections", "commands", "hermes", "errors"} | BASE | SERVICES

MAY_IMPORT: dict[str, set[str]] = {
    "errors": set(),
    "domain": {"errors"},
    "clock": set(),
    "gc_pause": set(),
    "gc_turns": set(),
    "logs": {"domain", "errors"},  # domain/env_flags.py: the rule of TURNLOG_LOG_JSON
    "config": {"domain", "errors"},
    "storage": {"domain", "errors"},
    "projections": {"storage", "domain", "errors"} | BASE,
    "commands": {"projections", "storage", "domain", "errors"} | BASE,
    "services": {"commands", "projections", "storage", "domain", "errors"} | BASE,
    "hermes": {"commands", "projections", "storage", "domain", "errors", "services"} | BASE,
    "api": BELOW_FACES | {"services", "api"},
    "turnlog": BELOW_FACES | {"services", "api", "aio"},
    "aio": PUBLIC | {"commands", "domain"},
    "tools": PUBLIC | BASE | {"tools", "domain"},
    "cli": PUBLIC | {"tools", "web"},
    "web": PUBLIC | {"tools"},
    "integrations": PUBLIC | {"tools"},
    "__main__": {"cli"},
}


def layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "turnlog"
    name = parts[1]
    if name in SERVICES:
        return "services"
    if name in API:
        return "api"
    if name in TOOLS:
        return "tools"
    return name


def target_layer(module: str) -> str:
    """The layer an import lands in, as the rules name it (a service or a tool by its own name too)."""
    parts = module.split(".")
    return "turnlog" if len(parts) == 1 else parts[1]



def violations(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for module, targets in sorted(graph.items()):
        allowed = MAY_IMPORT[layer(module)]
        for target in sorted(targets):
            if layer(target) == layer(module):
                continue
            if target_layer(target) in allowed or layer(target) in allowed:
                continue
            found.append(f"{module} -> {target}")
    return found


def test_every_module_imports_only_what_its_layer_may():
    assert violations(edges(modules())) == []


def test_a_planted_import_across_the_layers_is_found():
    graph = edges(modules())
    graph["turnlog.domain.keys"] = graph["turnlog.domain.keys"] | {"turnlog.storage.store"}
    graph["turnlog.cli.core"] = graph["turnlog.cli.core"] | {"turnlog.commands.routing"}
    assert set(violations(graph)) - set(violations(edges(modules()))) == {
        "turnlog.cli.core -> turnlog.commands.routing", "turnlog.domain.keys -> turnlog.storage.store"}


def all_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    return [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]


def full_edges(known: dict[str, Path]) -> dict[str, set[str]]:
    """edges(), with the imports under TYPE_CHECKING too."""
    graph = edges(known)
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in all_imports(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                stem = ".".join(base + ([node.module] if node.module else []))
                graph[name] |= {t for t in {stem, *(f"{stem}.{a.name}" for a in node.names)} if t in known and t != name}
    return graph


def test_type_only_imports_keep_to_the_layers_as_well():
    assert violations(full_edges(modules())) == []


# -- privacy -------------------------------------------------------------------------------------

# Documented names of the standard library that begin with an underscore.
STDLIB_PUBLIC = {"os._exit", "sys._getframe"}


def defined_in(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def private_uses(path: Path) -> list[str]:
    """`from m import _x` of another module, and `obj._x` where this module defines no `_x`."""
    tree = ast.parse(path.read_text())
    own = defined_in(tree)
    where = path.relative_to(ROOT.parent)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found += [f"{where}:{node.lineno}: from {'.' * node.level}{node.module or ''} import {a.name}"
                      for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            if node.attr in own or ast.unparse(node) in STDLIB_PUBLIC:
                continue
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_uses_another_modules_private_names():
    assert [use for path in sorted(ROOT.rglob("*.py")) for use in private_uses(path)] == []


def test_a_planted_private_call_is_found(tmp_path):
    planted = tmp_path / "turnlog" / "planted.py"
    planted.parent.mkdir()
    planted.write_text("from .commands.inbound import _respond\n"
                       "def go(t):\n    t.turns._forget(1)\n    return t._own\n"
                       "class A:\n    def __init__(self):\n        self._own = 1\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path / "turnlog"
    try:
        assert private_uses(planted) == ["turnlog/planted.py:1: from .commands.inbound import _respond",
                                         "turnlog/planted.py:3: t.turns._forget"]
    finally:
        ROOT = saved


def test_each_layer_named_in_the_rules_has_modules_and_every_module_a_rule():
    layers = {layer(m) for m in modules()}
    assert layers == set(MAY_IMPORT)


def test_module_name_is_the_dotted_path():
    assert module_name(ROOT / "cli" / "__init__.py") == "turnlog.cli"


def test_no_import_cycles_type_only_imports_included():
    # The cycle test of test_import_graph.py leaves `if TYPE_CHECKING:` imports out; none is needed either.
    from test_import_graph import cycles
    graph = full_edges(modules())
    graph = {m: {t for t in ts if modules()[t].name != "__init__.py"} for m, ts in graph.items()}
    assert cycles(graph) == []
