"""Numbers at the command line take ASCII digits only. Click reads them with int() and float(),
which also take Arabic-Indic, full-width and other digits: `web --port ٨٠` listened on port 80."""

from __future__ import annotations

from typing import Any, Iterable

import click


class _AsciiDigits(click.ParamType):
    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.isascii():
            self.fail(f"{value!r} is not a number in ASCII digits", param, ctx)
        return super().convert(value, param, ctx)


class AsciiInt(_AsciiDigits, click.types.IntParamType):
    pass


class AsciiFloat(_AsciiDigits, click.types.FloatParamType):
    pass


class AsciiIntRange(_AsciiDigits, click.IntRange):
    pass


class AsciiFloatRange(_AsciiDigits, click.FloatRange):
    pass


def _ascii(kind: click.ParamType) -> click.ParamType:
    if isinstance(kind, _AsciiDigits):
        return kind
    if isinstance(kind, click.IntRange):
        return AsciiIntRange(kind.min, kind.max, kind.min_open, kind.max_open, kind.clamp)
    if isinstance(kind, click.FloatRange):
        return AsciiFloatRange(kind.min, kind.max, kind.min_open, kind.max_open, kind.clamp)
    if isinstance(kind, click.types.IntParamType):
        return AsciiInt()
    if isinstance(kind, click.types.FloatParamType):
        return AsciiFloat()
    return kind


def ascii_numbers(params: Iterable[click.Parameter]) -> None:
    """Every number parameter of a command reads ASCII digits only (TurnlogCommand calls it)."""
    for param in params:
        param.type = _ascii(param.type)
