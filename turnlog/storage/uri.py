"""The `file:` URI SQLite opens a path by.

SQLite reads a URI's path up to the first `?` or `#` and decodes `%XX` in it, so a path is
percent-encoded whole (a file named `g#1.db` or `p%41.db` is that file, and the query that
follows, such as `mode=ro`, is not cut off). Every `file:` URI turnlog makes is made here.
"""

from __future__ import annotations

import os
from urllib.parse import quote, urlencode


def file_uri(path: str | os.PathLike[str], **query: str | int) -> str:
    """`file:` + the absolute path, percent-encoded, + `?` + the query parameters, if any."""
    uri = "file:" + quote(os.path.abspath(os.fspath(path)))
    return f"{uri}?{urlencode(query)}" if query else uri
