"""The public surface of `turnlog` is its `__all__`, exactly: every public name the package
holds is listed, the list is sorted, and each listed object is found in the module it says it
comes from (so its documentation and repr point somewhere real)."""

from __future__ import annotations

import importlib
import types

import turnlog

# Public on purpose, yet left out of __all__: `from turnlog import *` must not hide the builtin open().
NOT_STARRED = {"open"}


def public_names(package: types.ModuleType) -> set[str]:
    """The package's names that do not start with `_`, its submodules left out (they are how it is
    built, not what it offers)."""
    return {name for name, value in vars(package).items()
            if not name.startswith("_") and not isinstance(value, types.ModuleType)}


def test_every_public_name_of_the_package_is_in_all() -> None:
    unlisted = public_names(turnlog) - NOT_STARRED - set(turnlog.__all__)
    assert not unlisted, f"public but not in turnlog.__all__: {sorted(unlisted)}"


def test_all_names_only_what_the_package_holds() -> None:
    missing = [name for name in turnlog.__all__ if not hasattr(turnlog, name)]
    assert not missing, f"in turnlog.__all__ but not defined: {missing}"
    assert len(set(turnlog.__all__)) == len(turnlog.__all__), "turnlog.__all__ lists a name twice"


def test_all_is_sorted() -> None:
    assert turnlog.__all__ == sorted(turnlog.__all__, key=str.casefold)


def test_each_exported_name_lives_in_the_module_it_names() -> None:
    wrong = []
    for name in turnlog.__all__:
        value = getattr(turnlog, name, None)  # a name the package lacks is the test above's to report
        module_name = getattr(value, "__module__", None)
        if module_name is None or not isinstance(value, (type, types.FunctionType)):
            continue  # a constant: it has no home module to point at
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            wrong.append(f"{name}: its module {module_name} cannot be imported")
            continue
        if not module_name.startswith("turnlog") or not any(v is value for v in vars(module).values()):
            wrong.append(f"{name}: not found in its module {module_name}")
    assert not wrong, "; ".join(wrong)
