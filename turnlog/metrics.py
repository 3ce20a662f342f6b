"""The metrics a gateway exposes (`Turnlog.metrics()`): a prometheus-client registry holding

- the log's counts, read from the read models at each scrape by a custom collector (turns started
  and ended, deliveries by state, repeats refused, boots alive, inbox depth, projection lag), so
  every process and every restart reports the same numbers, which equal what the log holds;
- this process's histograms and counters (commands/recorder.py), labelled with its `process`.

prometheus-client is the `metrics` extra: this module imports it only when a registry is made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from .domain.delivery import STATES as DELIVERY_STATES
from .errors import InvalidRequest
from .projections.counts import DUPLICATES_REFUSED, TURNS_ENDED, TURNS_STARTED


@dataclass(frozen=True)
class ProjectionLag:
    name: str
    events: int
    seconds: float


@dataclass
class LogCounts:
    """What the log holds, as the read models have read it, at one scrape. `turns_started` is None
    when the counts model is missing (a read-only open of a file no writer has opened since it
    was added): its series are left out rather than reported as 0."""
    turns_started: int | None = 0
    turns_ended: dict[str, int] = field(default_factory=dict)  # by the item's outcome
    duplicates_refused: dict[str, int] = field(default_factory=dict)  # by why
    deliveries: dict[str, int] = field(default_factory=dict)  # by state
    boots_alive: dict[str, int] = field(default_factory=dict)  # by gateway
    inbox: dict[str, int] = field(default_factory=dict)  # pending, started
    lag: list[ProjectionLag] = field(default_factory=list)

    @classmethod
    def of(cls, counts: dict[tuple[str, str], int] | None, **others: Any) -> "LogCounts":
        """From the counts read model's rows (projections/counts.py) and the other reads."""
        if counts is None:
            return cls(turns_started=None, **others)

        def by_label(counter: str) -> dict[str, int]:
            return {label: n for (c, label), n in counts.items() if c == counter}
        return cls(turns_started=sum(by_label(TURNS_STARTED).values()), turns_ended=by_label(TURNS_ENDED),
                   duplicates_refused=by_label(DUPLICATES_REFUSED), **others)


def registry(read: Callable[[], LogCounts], in_process: Callable[[], list[Any]]) -> Any:
    """A CollectorRegistry with the log's counts (`read` at each scrape) and the collectors
    `in_process()` makes."""
    try:
        from prometheus_client import CollectorRegistry
    except ImportError:
        raise InvalidRequest("metrics need prometheus-client: pip install 'turnlog[metrics]'") from None
    made = CollectorRegistry(auto_describe=True)
    made.register(_LogCollector(read))
    for collector in in_process():
        made.register(collector)
    return made


class _LogCollector:
    def __init__(self, read: Callable[[], LogCounts]) -> None:
        self.read = read

    def describe(self) -> list[Any]:
        return []  # read at scrape time only: registering must not read the log

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        c = self.read()
        if c.turns_started is not None:
            yield from _event_counts(c)
        ledger = GaugeMetricFamily("turnlog_deliveries", "Rows of the delivery ledger, by state", labels=["state"])
        for state in sorted(set(DELIVERY_STATES) | set(c.deliveries)):
            ledger.add_metric([state], c.deliveries.get(state, 0))
        yield ledger
        boots = GaugeMetricFamily("turnlog_boots_alive", "Boots marked running or draining and not recovered,"
                                  " by gateway", labels=["gateway"])
        for gateway, n in sorted(c.boots_alive.items()):
            boots.add_metric([gateway], n)
        yield boots
        inbox = GaugeMetricFamily("turnlog_inbox_items", "Inbound items waiting (pending) or running (started)",
                                  labels=["state"])
        for state in ("pending", "started"):
            inbox.add_metric([state], c.inbox.get(state, 0))
        yield inbox
        lag_events = GaugeMetricFamily("turnlog_projection_lag_events", "Log positions a read model is behind",
                                       labels=["projection"])
        lag_seconds = GaugeMetricFamily("turnlog_projection_lag_seconds", "Event time between a read model's"
                                        " position and the log's head", labels=["projection"])
        for lag in c.lag:
            lag_events.add_metric([lag.name], lag.events)
            lag_seconds.add_metric([lag.name], lag.seconds)
        yield lag_events
        yield lag_seconds


def _event_counts(c: LogCounts) -> Iterator[Any]:
    """The counts model's series: turns started and ended, repeats refused."""
    from prometheus_client.core import CounterMetricFamily

    started = CounterMetricFamily("turnlog_turns_started", "Turns started (inbound items run), in the log")
    started.add_metric([], c.turns_started or 0)
    yield started
    ended = CounterMetricFamily("turnlog_turns_ended", "Turns ended, by outcome (answered, failed, stopped,"
                                " session_reset, ...), in the log", labels=["outcome"])
    for outcome, n in sorted(c.turns_ended.items()):
        ended.add_metric([outcome], n)
    yield ended
    refused = CounterMetricFamily("turnlog_duplicates_refused", "Inbound repeats refused, by reason"
                                  " (message_id, same_text), in the log", labels=["reason"])
    for reason, n in sorted(c.duplicates_refused.items()):
        refused.add_metric([reason], n)
    yield refused
