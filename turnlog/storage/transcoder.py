"""An orjson transcoder that writes the same bytes format as eventsourcing's JSONTranscoder.

orjson would flatten UUIDs and enums to plain values, so registered types are tagged in a
Python pre-pass; everything else goes straight to orjson.
"""

from __future__ import annotations

from typing import Any

import orjson
from eventsourcing.persistence import JSONTranscoder, TranscodingNotRegisteredError

_NATIVE = (str, int, float, bool, type(None))
_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


class OrjsonTranscoder(JSONTranscoder):
    def encode(self, obj: Any) -> bytes:
        if type(obj) is dict:
            tagged = None
            for k, v in obj.items():
                t = type(v)
                if t in _NATIVE:
                    continue
                if t in self.types or t is dict or t is list or t is tuple:
                    if tagged is None:
                        tagged = dict(obj)
                    tagged[k] = self._tag(v)
            if tagged is not None:
                obj = tagged
        else:
            obj = self._tag(obj)
        return orjson.dumps(obj, default=self._encode_obj, option=_OPTIONS)

    def decode(self, data: bytes) -> Any:
        obj = orjson.loads(data)
        if b'"_type_"' not in data:
            return obj
        return self._untag(obj)

    def _tag(self, o: Any) -> Any:
        t = type(o)
        if t in _NATIVE:
            return o
        if t is dict:
            return {k: self._tag(v) for k, v in o.items()}
        if t is list or t is tuple:
            return [self._tag(v) for v in o]
        if t in self.types:
            return self._encode_obj(o)
        return o

    def _encode_obj(self, o: Any) -> dict[str, Any]:
        try:
            transcoding = self.types[type(o)]
        except KeyError:
            raise TranscodingNotRegisteredError(f"Object of type {type(o)} is not serializable") from None
        return {"_type_": transcoding.name, "_data_": self._tag(transcoding.encode(o))}

    def _untag(self, o: Any) -> Any:
        t = type(o)
        if t is dict:
            if len(o) == 2 and "_type_" in o and "_data_" in o:
                d = o["_data_"]
                if type(d) is dict or type(d) is list:
                    o["_data_"] = self._untag(d)
                return self._decode_obj(o)
            for k, v in o.items():
                if type(v) is dict or type(v) is list:
                    o[k] = self._untag(v)
            return o
        if t is list:
            for i, v in enumerate(o):
                if type(v) is dict or type(v) is list:
                    o[i] = self._untag(v)
            return o
        return o
