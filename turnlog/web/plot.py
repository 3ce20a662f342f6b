"""The turns plot: turns per minute and p50/p99 turn latency per minute, as server-side SVG.

Pure: takes the finished turns (Turnlog.turn_spans) and returns the series or the SVG text.
"""

from __future__ import annotations

from typing import Any, Sequence

from .. import TurnSpan
from ..bench import percentile
from .html import text


def per_minute(spans: Sequence[TurnSpan]) -> list[dict[str, Any]]:
    """One point per minute that had turns: the minute, how many turns started, p50/p99 in ms."""
    minutes: dict[str, list[float]] = {}
    for span in spans:
        minutes.setdefault(span.started_at[:16], []).append(span.seconds * 1000)
    return [{"minute": m + "Z", "turns": len(v), "p50_ms": round(percentile(v, 50), 3),
             "p99_ms": round(percentile(v, 99), 3)} for m, v in sorted(minutes.items())]


W, H, PAD = 760, 170, 44


def svg(points: Sequence[dict[str, Any]]) -> str:
    if not points:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="60" role="img">'
                '<text x="10" y="30">no finished turns in the log</text></svg>')
    turns = _panel(points, [("turns", "#3465a4")], 0, "turns per minute")
    latency = _panel(points, [("p50_ms", "#4e9a06"), ("p99_ms", "#cc0000")], H + 20, "turn latency (ms): p50, p99")
    first, last = points[0]["minute"], points[-1]["minute"]
    axis = (f'<text x="{PAD}" y="{2 * H + 38}" class="axis">{text(first)}</text>'
            f'<text x="{W - 4}" y="{2 * H + 38}" text-anchor="end" class="axis">{text(last)}</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{2 * H + 44}" role="img" '
            f'aria-label="turns per minute and turn latency">{turns}{latency}{axis}</svg>')


def _panel(points: Sequence[dict[str, Any]], series: list[tuple[str, str]], top: int, title: str) -> str:
    peak = max(max(p[name] for p in points) for name, _ in series) or 1
    inner_w, inner_h = W - PAD - 8, H - 30
    step = inner_w / max(1, len(points) - 1)
    out = [f'<text x="{PAD}" y="{top + 14}" class="title">{text(title)}</text>',
           f'<line x1="{PAD}" y1="{top + H - 10}" x2="{W - 8}" y2="{top + H - 10}" stroke="#888"/>',
           f'<text x="{PAD - 4}" y="{top + 24}" text-anchor="end" class="axis">{text(_num(peak))}</text>',
           f'<text x="{PAD - 4}" y="{top + H - 10}" text-anchor="end" class="axis">0</text>']
    for name, colour in series:
        coords = " ".join(f"{PAD + i * step:.1f},{top + H - 10 - p[name] / peak * inner_h:.1f}"
                          for i, p in enumerate(points))
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{coords}">'
                   f'<title>{text(name)}</title></polyline>')
    return "".join(out)


def _num(value: float) -> str:
    return f"{value:.0f}" if value >= 10 else f"{value:.2f}"
