"""Every package pyproject.toml declares is used: imported by turnlog, its tests or its benchmarks."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Distribution names whose import name differs from the name with dashes as underscores.
IMPORT_NAMES = {"psycopg[binary,pool]": "psycopg", "python-telegram-bot": "telegram", "discord.py": "discord",
                "opentelemetry-api": "opentelemetry", "opentelemetry-sdk": "opentelemetry"}


def declared() -> dict[str, str]:
    """Import name of every requirement, the runtime ones and every extra's."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        requirements += extra
    names = {}
    for requirement in requirements:
        dist = re.match(r"[A-Za-z0-9_.\-\[\],]+?(?=[<>=!~ ;]|$)", requirement).group(0)
        names[dist] = IMPORT_NAMES.get(dist, dist.split("[")[0].replace("-", "_").lower())
    return names


def imported(folders: list[Path]) -> set[str]:
    found: set[str] = set()
    for folder in folders:
        for path in folder.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    found |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    found.add(node.module.split(".")[0])
    return found


def unused(names: dict[str, str], used: set[str]) -> list[str]:
    # Run, not imported: pytest and its xdist plugin (scripts/test spreads the files over workers),
    # and mypy (tests/codebase/test_types.py runs it).
    run_not_imported = {"pytest", "pytest_xdist", "mypy"}
    return sorted(dist for dist, module in names.items() if module not in used and module not in run_not_imported)


def test_every_declared_dependency_is_imported_somewhere():
    assert unused(declared(), imported([REPO / "turnlog", REPO / "tests", REPO / "benchmarks"])) == []


def test_a_declared_dependency_nothing_imports_is_named():
    names = {**declared(), "left-pad": "left_pad"}
    assert unused(names, imported([REPO / "turnlog", REPO / "tests", REPO / "benchmarks"])) == ["left-pad"]


def test_the_import_names_are_read_from_the_source():
    assert {"eventsourcing", "sqlite_utils", "orjson", "zstandard", "click"} <= imported([REPO / "turnlog"])
