"""`turnlog metrics`: one scrape of the metrics `turnlog web` serves at /metrics, printed."""

from __future__ import annotations

import math
from typing import Any

import click

from .base import command, engine
from .output import Output, output_options


@command()
@output_options
@click.pass_context
def metrics(ctx: click.Context, out: Output) -> None:
    """Print the metrics once, in Prometheus' text format (--json: families and samples).

    The log's counts (turns, deliveries by state, repeats refused, boots alive, inbox depth,
    projection lag); this command's own process has run no turn, so its histograms are empty.
    Needs the `metrics` extra (prometheus-client)."""
    registry = engine(ctx).metrics()
    from prometheus_client import generate_latest  # the extra: metrics() said so if it is missing

    out.record(families(registry), lambda: click.echo(generate_latest(registry).decode(), nl=False))


def families(registry: Any) -> list[dict[str, Any]]:
    return [{"name": f.name, "type": f.type, "help": f.documentation,
             "samples": [{"name": s.name, "labels": s.labels, "value": _number(s.value)} for s in f.samples]}
            for f in registry.collect()]


def _number(value: float) -> Any:
    """JSON has no infinity: a histogram's +Inf bucket bound is a label, but a value may be one too."""
    if math.isinf(value) or math.isnan(value):
        return str(value)
    return int(value) if value == int(value) else value


COMMANDS = [metrics]
