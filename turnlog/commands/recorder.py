"""What this process measures as it works: in-process histograms and counters (prometheus-client,
once a scrape asked for them: `Turnlog.metrics()`), and the spans of a turn (OpenTelemetry, when
installed). Owned by one Turnlog and reached through its CommandContext; with neither library,
or before anything asked for metrics, every call is a cheap no-op.

Counts that must equal the log are not kept here: they are read from the read models at scrape
time (turnlog/metrics.py), so they stay right across processes and restarts.
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from typing import Any, ContextManager, Iterator

from ..domain.context_prompt import redact_chat_id, redact_user_id, redacts
from ..domain.source import SessionSource

# Seconds: a turn's engine part is milliseconds, an agent's seconds to minutes.
TURN_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
LEASE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


_lease_log = logging.getLogger("turnlog.lease")
_turn_log = logging.getLogger("turnlog.turn")
_delivery_log = logging.getLogger("turnlog.delivery")


class _NoSpan:
    def set_attribute(self, name: str, value: Any) -> None:
        pass


NO_SPAN = _NoSpan()


class Recorder:
    """`owner` labels this process's series (`process`): they are per process, not the log's."""

    def __init__(self, owner: str, tracer_provider: Any = None) -> None:
        self.owner = owner
        self._metrics: _Metrics | None = None
        self._tracer = _tracer(tracer_provider)
        self._global_tracer = tracer_provider is None

    # -- metrics ----------------------------------------------------------------------------

    def enable_metrics(self) -> list[Any]:
        """Start measuring (idempotent); returns the collectors to register in a scrape's registry."""
        if self._metrics is None:
            self._metrics = _Metrics(self.owner)
        return self._metrics.collectors

    def turn_part(self, part: str, seconds: float) -> None:
        """`part`: engine (the turn's own work: routing, lease, writes), agent (the responder) or send."""
        if self._metrics is not None:
            self._metrics.turn.labels(self.owner, part).observe(seconds)

    def lease_wait(self, seconds: float) -> None:
        if self._metrics is not None:
            self._metrics.lease_wait.labels(self.owner).observe(seconds)

    def takeover(self, session_id: str) -> None:
        _lease_log.info("took over the expired lease of session %s", session_id,
                        extra={"session_id": session_id, "owner": self.owner})
        if self._metrics is not None:
            self._metrics.takeovers.labels(self.owner).inc()

    def stale_write(self, session_id: str) -> None:
        _lease_log.warning("a write on session %s was refused: its lease had moved on", session_id,
                           extra={"session_id": session_id, "owner": self.owner})
        if self._metrics is not None:
            self._metrics.stale_writes.labels(self.owner).inc()

    def turn_failed(self, session_id: str, turn_id: str, failure: BaseException) -> None:
        _turn_log.warning("turn %s on session %s failed: %s: %s", turn_id, session_id, type(failure).__name__,
                          failure, extra={"session_id": session_id, "turn_id": turn_id, "owner": self.owner})

    def send_failed(self, session_id: str, delivery_id: str, error: str, unknown: bool) -> None:
        _delivery_log.warning("send of delivery %s %s: %s", delivery_id,
                              "may have reached the platform (unknown)" if unknown else "failed", error,
                              extra={"session_id": session_id, "delivery_id": delivery_id, "unknown": unknown,
                                     "owner": self.owner})

    # -- traces -----------------------------------------------------------------------------

    def turn_span(self, source: SessionSource, key: str) -> Any:
        """The span of one turn, with its routing attributes (hashed only when traced)."""
        return self.span("turn", **source_attributes(source, key)) if self._traced() else _NOT_TRACED

    def _traced(self) -> bool:
        return self._tracer is not None and (not self._global_tracer or global_provider_set())

    def span(self, name: str, **attributes: Any) -> ContextManager[Any]:
        """A child of the current span (a turn's), or NO_SPAN when nothing records spans (no
        OpenTelemetry, or its API without a provider: its spans would be no-ops, built ten times a turn)."""
        if not self._traced():
            return _NOT_TRACED
        return self._tracer.start_as_current_span(name, attributes=attributes)  # type: ignore[no-any-return]


class _NotTraced:
    def __enter__(self) -> _NoSpan:
        return NO_SPAN

    def __exit__(self, *exc: Any) -> None:
        return None


_NOT_TRACED = _NotTraced()


class Stopwatch:
    """Seconds spent in parts of one turn, so that its engine time is what the parts leave."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.parts: dict[str, float] = {}

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            self.parts[name] = self.parts.get(name, 0.0) + time.perf_counter() - began

    def report(self, recorder: Recorder) -> None:
        total = time.perf_counter() - self.started
        for name, seconds in self.parts.items():
            recorder.turn_part(name, seconds)
        recorder.turn_part("engine", max(total - sum(self.parts.values()), 0.0))


def source_attributes(source: SessionSource, key: str) -> dict[str, str]:
    """A span's routing attributes: the key with its chat and user ids hashed on the platforms
    whose ids the context prompt hashes (domain/context_prompt.py), and the platform."""
    platform = str(source.platform)
    if redacts(platform, redact_pii=True):
        if source.chat_id:
            key = key.replace(str(source.chat_id), redact_chat_id(str(source.chat_id)))
        if source.user_id:
            key = key.replace(str(source.user_id), redact_user_id(str(source.user_id)))
    return {"turnlog.routing_key": key, "turnlog.platform": platform}


class _Metrics:
    def __init__(self, owner: str) -> None:
        from prometheus_client import Counter, Histogram  # an extra: imported only when asked for

        self.turn = Histogram("turnlog_turn_seconds", "Turn latency in this process, by part: engine (routing,"
                              " lease, writes), agent (the responder) and send (the platform)",
                              ("process", "part"), buckets=TURN_BUCKETS, registry=None)
        self.lease_wait = Histogram("turnlog_lease_wait_seconds", "Waits for a session's turn lease in this"
                                    " process", ("process",), buckets=LEASE_BUCKETS, registry=None)
        self.takeovers = Counter("turnlog_lease_takeovers", "Leases this process took over from a holder"
                                 " that let them expire", ("process",), registry=None)
        self.stale_writes = Counter("turnlog_stale_writes_refused", "Writes of this process refused because"
                                    " its lease had moved on", ("process",), registry=None)
        self.collectors = [self.turn, self.lease_wait, self.takeovers, self.stale_writes]


def global_provider_set() -> bool:
    """Whether OpenTelemetry's global tracer provider is a real one (set by the application)."""
    from opentelemetry import trace

    return not isinstance(trace.get_tracer_provider(), (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


def _tracer(provider: Any) -> Any:
    try:
        from opentelemetry import trace  # the otel extra: without it, spans are no-ops
    except ImportError:
        return None
    return provider.get_tracer("turnlog") if provider is not None else trace.get_tracer("turnlog")
