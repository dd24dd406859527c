"""Reverse maps: for each relation, from-key -> {to-value: payload}, updated in O(1).

An insertion-ordered dict per from-key acts as a set (payload None) or, for holds, maps a
hold's identity to its AllocationRef. Empty entries are removed at once, so a map never grows
with keys that no longer link to anything and a fresh index and a folded one compare equal.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from dra_mirror.service.model.delta import IndexDelta
from dra_mirror.service.model.relations import Relation

_EMPTY: dict[Any, Any] = {}
_ABSENT = object()


class Links:
    def __init__(self, relations: Iterable[Relation]) -> None:
        self._maps: dict[Relation, dict[Hashable, dict[Hashable, Any]]] = {r: {} for r in relations}
        # When set, every add/remove is also noted there (net effect per entry; delta.py).
        self.delta: IndexDelta | None = None

    def add(self, relation: Relation, key: Hashable, value: Hashable, payload: Any = None) -> None:
        targets = self._maps[relation].get(key)
        if targets is None:
            self._maps[relation][key] = targets = {}
        targets[value] = payload
        delta = self.delta
        if delta is not None:  # delta.link, inlined: this runs for every link of a sync
            entry = (relation, key, value)
            if delta.unlinked:
                delta.unlinked.discard(entry)
            delta.linked[entry] = payload

    def remove(self, relation: Relation, key: Hashable, value: Hashable) -> None:
        by_key = self._maps[relation]
        targets = by_key.get(key)
        if targets is None:
            return
        if targets.pop(value, _ABSENT) is not _ABSENT and self.delta is not None:
            self.delta.unlink((relation, key, value))
        if not targets:
            del by_key[key]

    def get(self, relation: Relation, key: Hashable) -> Mapping[Hashable, Any]:
        """The linked values of `key` (read-only)."""
        found: Mapping[Hashable, Any] = self._maps[relation].get(key, _EMPTY)
        return found

    def mapping(self, relation: Relation) -> Mapping[Hashable, Mapping[Hashable, Any]]:
        """The whole map of one relation (read-only), for stores and tests."""
        return self._maps[relation]
