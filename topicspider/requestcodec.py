"""Requests as JSON data, for the durable frontier's store (:mod:`topicspider.scheduler`)
and the distributed crawl's Redis queue (:mod:`topicspider.cluster.scheduler`).

Scrapy's disk queues pickle requests, and unpickling runs whatever the bytes say: fine
for a file only this crawl writes, not for a database or a Redis server others can write to. Here a
request is :meth:`scrapy.Request.to_dict` (callbacks by their spider method's name)
written as JSON, with bytes and non-string dictionary keys tagged, so that reading it
back builds a request and nothing else. A request subclass is named by its import path,
and only those of Scrapy and topicspider are loaded back.
"""

from __future__ import annotations

import base64
import inspect
import json
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import Request as ScrapyRequest
from scrapy.utils.misc import load_object
from scrapy.utils.request import request_from_dict

if TYPE_CHECKING:
    from scrapy import Request, Spider

# Tags of values JSON has no form for; a NUL-led key is never a real meta key.
BYTES_TAG = "\0b"
PAIRS_TAG = "\0d"  # a dictionary whose keys are not all strings, or that holds a tag
TRUSTED_CLASS_PREFIXES = ("scrapy.", "topicspider.")
# Meta keys topicspider's and Scrapy's components compute with, and their types.
META_TYPES: dict[str, type] = {
    "site": str, "depth": int, "download_slot": str, "redirect_urls": list, "redirect_times": int,
    "retry_times": int, "download_timeout": float, "dont_redirect": bool, "dont_retry": bool,
}
MAX_DEPTH = 10_000  # far past any crawl's DEPTH; a level count is kept per depth


class UnencodableRequest(ValueError):
    """A request holding a value that is not data (an object, a set), or a callback
    that is not a method of the spider."""


def encode_request(request: Request, spider: Spider | None) -> bytes:
    try:
        return json.dumps(_to_json(_fields(request, spider)), separators=(",", ":")).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise UnencodableRequest(f"{request}: {exc}") from exc


def _fields(request: Request, spider: Spider | None) -> dict[str, Any]:
    """:meth:`scrapy.Request.to_dict`, less its search of every spider attribute for each
    callback (``inspect.getmembers``), which costs more than the rest together."""
    fields: dict[str, Any] = {
        "url": request.url,
        "callback": _method_name(request.callback, spider),
        "errback": _method_name(request.errback, spider),
        "headers": dict(request.headers),
    }
    for attribute in request.attributes:
        fields.setdefault(attribute, getattr(request, attribute))
    if type(request) is not ScrapyRequest:
        fields["_class"] = f"{type(request).__module__}.{type(request).__name__}"
    return fields


def _method_name(function: Any, spider: Spider | None) -> str | None:
    if function is None or isinstance(function, str):
        return function
    name = getattr(function, "__name__", None)
    if spider is None or getattr(function, "__self__", None) is not spider or getattr(spider, str(name), None) != function:
        raise ValueError(f"{function!r} is not a method of the spider")
    return str(name)


def decode_request(data: bytes, spider: Spider | None) -> Request:
    """The request ``data`` holds. Only what a crawl's own requests are: an http(s) URL,
    callbacks among the spider's public methods, a request class of Scrapy's or
    topicspider's; anything else (or anything that fails) is :class:`UnencodableRequest`."""
    try:
        fields = _from_json(json.loads(data))
        if not isinstance(fields, dict) or not isinstance(fields.get("url"), str):
            raise ValueError("not a request")
        if urlsplit(fields["url"]).scheme not in ("http", "https"):
            raise ValueError(f"not an http(s) URL: {fields['url'][:100]!r}")
        _check_class(fields.get("_class"))
        _check_meta(fields.get("meta"))
        for name in (fields.get("callback"), fields.get("errback")):
            if name is not None and not _is_public_method(spider, name):
                raise ValueError(f"{name!r} is not a method of the spider")
        return request_from_dict(fields, spider=spider)
    except Exception as exc:  # noqa: BLE001 - whatever the bytes do, they are not a request
        raise UnencodableRequest(f"undecodable request: {exc!r}"[:300]) from exc


def _check_meta(meta: Any) -> None:
    """The meta keys the crawler computes with hold what it puts there: a bad type or a
    huge depth would raise, or run for ever, far from here."""
    if meta is None:
        return
    if not isinstance(meta, dict):
        raise ValueError("meta is not a dictionary")
    for key, kind in META_TYPES.items():
        if key in meta and not _is_kind(meta[key], kind):
            raise ValueError(f"meta {key!r} is not {kind.__name__}: {str(meta[key])[:50]!r}")
    if not 0 <= meta.get("depth", 0) <= MAX_DEPTH:
        raise ValueError(f"meta 'depth' {meta['depth']} is out of 0..{MAX_DEPTH}")


def _is_kind(value: Any, kind: type) -> bool:
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is list:
        return isinstance(value, list) and all(isinstance(item, str) for item in value)
    return isinstance(value, kind)


def request_meta(data: bytes) -> dict[str, Any]:
    """What ``data``'s request meta says of its level (``site``, ``depth``), for an entry
    :func:`decode_request` refused; empty when it says nothing usable. Reads JSON only."""
    try:
        fields = json.loads(data)
        meta = fields.get("meta") if isinstance(fields, dict) else None
        if not isinstance(meta, dict):
            return {}
        site, depth = meta.get("site"), meta.get("depth", 0)
        if isinstance(site, str) and _is_kind(depth, int) and 0 <= depth <= MAX_DEPTH:
            return {"site": site, "depth": depth}
    except Exception:  # noqa: BLE001 - whatever the bytes are, they say nothing of a level
        pass
    return {}


def _check_class(name: Any) -> None:
    if name is None:
        return
    if not str(name).startswith(TRUSTED_CLASS_PREFIXES):
        raise ValueError(f"request class {name!r} is not Scrapy's or topicspider's")
    loaded = load_object(str(name))
    if not (isinstance(loaded, type) and issubclass(loaded, ScrapyRequest)):
        raise ValueError(f"{name!r} is not a request class")


def _is_public_method(spider: Spider | None, name: Any) -> bool:
    return (spider is not None and isinstance(name, str) and not name.startswith("_")
            and inspect.ismethod(getattr(spider, name, None)))


def _to_json(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, bytes):
        return {BYTES_TAG: base64.b64encode(value).decode("ascii")}
    if isinstance(value, (list, tuple)):
        return [_to_json(item) for item in value]
    if isinstance(value, dict):
        if all(isinstance(key, str) and not key.startswith("\0") for key in value):
            return {key: _to_json(item) for key, item in value.items()}
        return {PAIRS_TAG: [[_to_json(key), _to_json(item)] for key, item in value.items()]}
    raise TypeError(f"{type(value).__name__} is not data")


def _from_json(value: Any) -> Any:
    if isinstance(value, list):
        return [_from_json(item) for item in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1 and BYTES_TAG in value:
        return base64.b64decode(value[BYTES_TAG])
    if len(value) == 1 and PAIRS_TAG in value:
        return {_from_json(key): _from_json(item) for key, item in value[PAIRS_TAG]}
    return {key: _from_json(item) for key, item in value.items()}
