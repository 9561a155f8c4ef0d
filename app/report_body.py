"""A report's stored body: ``report.json``'s exact bytes, zlib-compressed, kept once per
report. Every case as posted lives here (the ``cases`` columns hold what is queried), so a
report takes well under half the bytes of a JSON copy per case beside the columns."""

from __future__ import annotations

import json
import zlib
from typing import Any

# zlib's default level: within a few percent of level 9 on a report, at half the time.
LEVEL = 6


def document_bytes(document: dict[str, Any]) -> bytes:
    """What ``report.json`` serves for a document. Python's float repr is the shortest
    round-tripping form, so floats come back exact."""
    return json.dumps(document, ensure_ascii=False, allow_nan=False).encode("utf-8")


def encode(meta: dict[str, Any], cases: list[dict[str, Any]], extra: dict[str, Any]) -> bytes:
    return encode_document({"meta": meta, "cases": cases, **extra})


def json_bytes(body: bytes) -> bytes:
    return zlib.decompress(body)


def document(body: bytes) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(json_bytes(body))
    return value


def appended(body: bytes, cases: list[dict[str, Any]]) -> dict[str, Any]:
    """The document of ``body`` with ``cases`` added after the ones it holds (their arrival
    order); ``encode_document`` stores it."""
    doc = document(body)
    meta, held = doc.pop("meta"), doc.pop("cases")
    return {"meta": meta, "cases": [*held, *cases], **doc}


def encode_document(doc: dict[str, Any]) -> bytes:
    return zlib.compress(document_bytes(doc), LEVEL)
