"""Reverse maps: for each relation, from-key -> {to-value: payload}, updated in O(1).

An insertion-ordered dict per from-key acts as a set (payload None) or, for holds, maps a
hold's identity to its AllocationRef. Empty entries are removed at once, so a map never grows
with keys that no longer link to anything and a fresh index and a folded one compare equal.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dra_mirror.service.model.delta import REMOVED, IndexDelta

_EMPTY: dict[Any, Any] = {}


class Links:
    def __init__(self, relations: Iterable[str]) -> None:
        self._maps: dict[str, dict[Any, dict[Any, Any]]] = {r: {} for r in relations}
        # When set, every add/remove is also noted there (net effect per entry; delta.py).
        self.delta: IndexDelta | None = None

    def add(self, relation: str, key: Any, value: Any, payload: Any = None) -> None:
        targets = self._maps[relation].get(key)
        if targets is None:
            self._maps[relation][key] = targets = {}
        targets[value] = payload
        if self.delta is not None:
            self.delta.links[(relation, key, value)] = payload

    def remove(self, relation: str, key: Any, value: Any) -> None:
        by_key = self._maps[relation]
        targets = by_key.get(key)
        if targets is None:
            return
        if targets.pop(value, REMOVED) is not REMOVED and self.delta is not None:
            self.delta.links[(relation, key, value)] = REMOVED
        if not targets:
            del by_key[key]

    def get(self, relation: str, key: Any) -> dict[Any, Any]:
        """The linked values of `key` (read-only: do not mutate)."""
        return self._maps[relation].get(key, _EMPTY)

    def mapping(self, relation: str) -> dict[Any, dict[Any, Any]]:
        """The whole map of one relation (read-only), for stores and tests."""
        return self._maps[relation]
