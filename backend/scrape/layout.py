"""A stored scrape in columns: its layout (which series, in which order) and two arrays of values.

A vLLM target's exposition has the same series in the same order scrape after scrape; only the numbers
change. So a scrape is kept as a *layout* (the kept series as (name, labels) in exposition order and the
`_created` series as (base, labels)), shared by every scrape of that shape and named by its digest, and
two float64 arrays: the series' values and the `_created` values, in the layout's order. Finalising a
bucket then reads a few kilobytes of numbers a target instead of re-reading each sample's labels as JSON.

Pure: no I/O. The data layer stores layouts once (by digest) and the scrapes as raw float64 bytes.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from backend.scrape.parse import WANTED, ExpositionError, ParsedScrape

LabelsKey = tuple[tuple[str, str], ...]
CACHE_SIZE = 4096  # layouts kept decoded in a process (a fleet has about one a target)


@dataclass(frozen=True, eq=False)
class Layout:
    """One shape of exposition: per series its name and sorted labels, and which `_created` value is its."""

    digest: bytes
    names: tuple[str, ...]
    labels: tuple[LabelsKey, ...]
    created_index: np.ndarray = field(repr=False)  # per series: index into the created values, -1: none
    n_created: int = 0
    duplicate: str | None = None  # a series the exposition holds twice (a malformed exposition), if any

    @property
    def size(self) -> int:
        return len(self.names)

    @functools.cached_property
    def keys(self) -> list[tuple[str, LabelsKey]]:
        """(name, labels) per series."""
        return list(zip(self.names, self.labels, strict=True))


def shape_json(parsed: ParsedScrape) -> str:
    """The layout of a parsed scrape as canonical JSON text (what is stored, and what the digest is of)."""
    return json.dumps({"series": [[n, lb] for n, lb, _v in parsed.samples],
                       "created": [[b, lb] for b, lb, _v in parsed.created]}, separators=(",", ":"))


def digest_of(shape: str) -> bytes:
    return hashlib.sha256(shape.encode()).digest()


def values_of(parsed: ParsedScrape) -> tuple[bytes, bytes]:
    """The scrape's series values and `_created` values as little-endian float64 bytes."""
    return (np.fromiter((v for _n, _lb, v in parsed.samples), "<f8", len(parsed.samples)).tobytes(),
            np.fromiter((v for _b, _lb, v in parsed.created), "<f8", len(parsed.created)).tobytes())


def _key(labels: dict[str, str], pairs: dict, drop: str | None = None) -> LabelsKey:
    """Labels sorted, with their (name, value) pairs and strings shared across a layout's series."""
    return tuple(pairs.setdefault(kv, (sys.intern(kv[0]), sys.intern(kv[1])))
                 for kv in sorted(labels.items()) if kv[0] != drop)


def build(shape: str, digest: bytes | None = None) -> Layout:
    """A Layout from its stored JSON text."""
    doc = json.loads(shape)
    pairs: dict = {}
    created_at = {(base, _key(lb, pairs)): i for i, (base, lb) in enumerate(doc["created"])}
    names, labels, index = [], [], []
    seen: set = set()
    duplicate = None
    for name, lb in doc["series"]:
        names.append(sys.intern(name))
        labels.append(_key(lb, pairs))
        index.append(created_at.get((WANTED[name], _key(lb, pairs, drop="le")), -1))
        if duplicate is None and (name, labels[-1]) in seen:
            duplicate = f"{name}{lb}"
        seen.add((name, labels[-1]))
    return Layout(digest or digest_of(shape), tuple(names), tuple(labels), np.array(index, dtype=np.intp),
                  len(doc["created"]), duplicate)


class LayoutCache:
    """Decoded layouts by digest, the least recently used dropped past `size`."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._items: OrderedDict[bytes, Layout] = OrderedDict()

    def get(self, digest: bytes) -> Layout | None:
        layout = self._items.get(digest)
        if layout is not None:
            self._items.move_to_end(digest)
        return layout

    def put(self, layout: Layout) -> Layout:
        self._items[layout.digest] = layout
        self._items.move_to_end(layout.digest)
        while len(self._items) > self.size:
            self._items.popitem(last=False)
        return layout

    def of(self, shape: str, digest: bytes | None = None) -> Layout:
        digest = digest or digest_of(shape)
        return self.get(digest) or self.put(build(shape, digest))

    def checked(self, shape: str, digest: bytes | None = None) -> Layout:
        """The layout of a new scrape; ExpositionError if it holds a series twice (a stored one is read
        as it is, with `of`)."""
        layout = self.of(shape, digest)
        if layout.duplicate:
            raise ExpositionError(f"series {layout.duplicate} appears twice in one exposition")
        return layout


LAYOUTS = LayoutCache()
