"""The archive file (.tlar): a zip of `manifest.json` and `events.jsonl` (deflate), docs/archive.md.

`events.jsonl` holds one JSON object per archived event, in log order: its position, stream
id, version, topic, the exact stored bytes (`stored`, base64: what the hash chain covers and
what a restore puts back) and its seal; `event` is the event's JSON as turnlog's transcoder
wrote it (readable without turnlog), or null when the stored bytes are not plain JSON once
inflated (an encrypted event). The manifest says what is in it and holds the sha256 of the
events member, so a reader checks the payload before trusting it.

A file is written beside OUT under a temporary name, fsynced, linked into place (never
replacing a file), its folder fsynced, then read back and checked: a file at OUT is whole.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import zipfile
from dataclasses import dataclass
from typing import Any, Iterable

import orjson

from ..errors import InvalidRequest, StoreError
from .backup import beside, file_sha256, fsync_file, fsync_folder
from .event_compressor import inflate

FORMAT = "turnlog-archive"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
EVENTS = "events.jsonl"


@dataclass(frozen=True)
class ArchivedEvent:
    position: int
    originator_id: str  # the stream id as the log's table holds it
    originator_version: int
    topic: str
    stored: bytes
    seal: str

    def to_line(self) -> bytes:
        try:
            event: Any = orjson.loads(inflate(self.stored))
        except Exception:  # noqa: BLE001 - not plain JSON (encrypted): the stored bytes alone
            event = None
        return orjson.dumps({"position": self.position, "originator_id": self.originator_id,
                             "originator_version": self.originator_version, "topic": self.topic,
                             "stored": base64.b64encode(self.stored).decode(), "seal": self.seal,
                             "event": event}) + b"\n"

    @classmethod
    def from_line(cls, line: bytes) -> "ArchivedEvent":
        d = orjson.loads(line)
        return cls(int(d["position"]), str(d["originator_id"]), int(d["originator_version"]), str(d["topic"]),
                   base64.b64decode(d["stored"]), str(d["seal"]))


@dataclass(frozen=True)
class Archive:
    path: str
    sha256: str
    manifest: dict[str, Any]
    events: list[ArchivedEvent]


def stream_digest(events: Iterable[ArchivedEvent]) -> str:
    """sha256 over a session's archived events as stored (position, stream, version, bytes)."""
    h = hashlib.sha256()
    for e in events:
        h.update(f"{e.position}|{e.originator_id}|{e.originator_version}|{e.topic}|".encode())
        h.update(e.stored)
    return h.hexdigest()


def write(out: str, manifest: dict[str, Any], events: list[ArchivedEvent]) -> Archive:
    """Write the archive at `out` (refused when it exists) and read it back; its sha256 is the file's."""
    if os.path.lexists(out):
        raise InvalidRequest(f"{out} exists: an archive never replaces a file (remove it or name another)")
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        raise InvalidRequest(f"cannot write the archive {out}: directory {folder} does not exist")
    payload = b"".join(e.to_line() for e in events)
    manifest = {**manifest, "format": FORMAT, "format_version": FORMAT_VERSION, "event_count": len(events),
                "payload_sha256": hashlib.sha256(payload).hexdigest()}
    tmp = beside(out, "archiving")
    try:
        with zipfile.ZipFile(tmp, "w") as z:
            z.writestr(zipfile.ZipInfo(MANIFEST, (1980, 1, 1, 0, 0, 0)), orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
            info = zipfile.ZipInfo(EVENTS, (1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, payload, compresslevel=6)
        fsync_file(tmp)
        try:
            os.link(tmp, out)
        except FileExistsError:
            raise InvalidRequest(f"{out} appeared while the archive was written: it was left as it is") from None
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    try:  # the file is ours until the log records it: one that fails here is taken away again
        fsync_folder(out)
        written = read(out)
        if written.manifest != manifest or [e.position for e in written.events] != [e.position for e in events]:
            raise StoreError(f"the archive {out} does not read back as written")
    except BaseException:
        os.remove(out)
        raise
    return written


def read(path: str) -> Archive:
    """Read and check an archive: a missing file is InvalidRequest, a damaged one StoreError."""
    if not os.path.isfile(path):
        raise InvalidRequest(f"no archive file at {path}")
    try:
        digest = file_sha256(path)
        with zipfile.ZipFile(path) as z:
            manifest = orjson.loads(z.read(MANIFEST))
            payload = z.read(EVENTS)
    except (OSError, zipfile.BadZipFile, KeyError, orjson.JSONDecodeError, EOFError, ValueError) as e:
        raise StoreError(f"{path} is not a readable turnlog archive ({type(e).__name__}: {e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise StoreError(f"{path} is not a turnlog archive (its manifest names no format {FORMAT!r})")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise StoreError(f"{path} is a turnlog archive of format version {manifest.get('format_version')!r};"
                         f" this turnlog reads version {FORMAT_VERSION}")
    if hashlib.sha256(payload).hexdigest() != manifest.get("payload_sha256"):
        raise StoreError(f"{path} is damaged: its events do not match the manifest's payload_sha256")
    try:
        events = [ArchivedEvent.from_line(line) for line in io.BytesIO(payload) if line.strip()]
    except (orjson.JSONDecodeError, KeyError, ValueError, TypeError) as e:
        raise StoreError(f"{path} is damaged: an event line does not parse ({e})") from None
    if len(events) != manifest.get("event_count"):
        raise StoreError(f"{path} is damaged: {len(events)} events, its manifest says {manifest.get('event_count')}")
    return Archive(path, digest, manifest, events)
