"""SQL helpers shared by the log readers and the read models: fixed-width UTC time text (so that
comparing the strings compares the times) and IN (...) lists filled in chunks."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Iterable


def utc_text(moment: Any) -> str:
    """A fixed-width UTC ISO time, so that comparing the strings compares the times."""
    if moment.utcoffset():
        moment = moment.astimezone(UTC)
    return moment.replace(tzinfo=UTC).isoformat(timespec="microseconds")


def utc_iso(text: str) -> str:
    """utc_text of a time given as ISO text (as `LogReader.fields` gives times)."""
    if len(text) == 32 and text[19] == "." and text.endswith("+00:00"):
        return text
    return utc_text(datetime.fromisoformat(text))


IN_LIMIT = 500  # values per IN (...) list


def rows_in(db: Any, sql: str, values: Iterable[Any], *params: Any) -> list[tuple[Any, ...]]:
    """`sql` with its `IN ({})` filled with placeholders for `values` (in chunks; `params` follow
    them in each), every row as a tuple."""
    values = sorted(set(values))
    rows: list[tuple[Any, ...]] = []
    for start in range(0, len(values), IN_LIMIT):
        chunk = values[start:start + IN_LIMIT]
        rows += map(tuple, db.execute(sql.format(",".join("?" * len(chunk))), (*chunk, *params)).fetchall())
    return rows
