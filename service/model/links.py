"""Reverse maps: for each relation, from-key -> {to-value: payload}, updated in O(1).

Each from-key reads as an insertion-ordered mapping, a set (payload None) or, for holds, a
hold's identity -> its AllocationRef. Most from-keys link one value (a claim's referring pod,
a device's holder, a uuid's device: ~120,000 of them at 5,000 nodes), so a from-key linking
one value is kept as the pair `(value, payload)` and as a dict only while it links several
(a dict of one entry is ~230 bytes, the pair 56); readers see a mapping either way, never the
pair. Empty entries are removed at once, so a map never grows with keys that no longer link to
anything and a fresh index and a folded one compare equal.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from typing import Any

from dra_mirror.service.model.delta import IndexDelta
from dra_mirror.service.model.relations import Relation

_EMPTY: dict[Any, Any] = {}
_ABSENT = object()

Linked = Mapping[Hashable, Any]


def _read(found: Any) -> Linked:
    if found is None:
        return _EMPTY
    return {found[0]: found[1]} if type(found) is tuple else found


class _RelationView(Mapping[Hashable, Linked]):
    """One relation's whole map, read-only, each from-key's values as a mapping."""

    __slots__ = ("_by_key",)

    def __init__(self, by_key: dict[Hashable, Any]) -> None:
        self._by_key = by_key

    def __getitem__(self, key: Hashable) -> Linked:
        return _read(self._by_key[key])

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self._by_key)

    def __len__(self) -> int:
        return len(self._by_key)


class Links:
    def __init__(self, relations: Iterable[Relation]) -> None:
        # from-key -> (value, payload) when it links one value, else {value: payload}
        self._maps: dict[Relation, dict[Hashable, Any]] = {r: {} for r in relations}
        # When set, every add/remove is also noted there (net effect per entry; delta.py).
        self.delta: IndexDelta | None = None

    def add(self, relation: Relation, key: Hashable, value: Hashable, payload: Any = None) -> None:
        by_key = self._maps[relation]
        found = by_key.get(key)
        if found is None:
            by_key[key] = (value, payload)
        elif type(found) is not tuple:
            found[value] = payload
        elif found[0] == value:
            by_key[key] = (found[0], payload)  # a dict would keep the first key it was given
        else:
            by_key[key] = {found[0]: found[1], value: payload}
        delta = self.delta
        if delta is not None:  # delta.link, inlined: this runs for every link of a sync
            entry = (relation, key, value)
            if delta.unlinked:
                delta.unlinked.discard(entry)
            delta.linked[entry] = payload

    def remove(self, relation: Relation, key: Hashable, value: Hashable) -> None:
        by_key = self._maps[relation]
        found = by_key.get(key)
        if found is None:
            return
        if type(found) is tuple:
            if found[0] != value:
                return
            del by_key[key]
        else:
            if found.pop(value, _ABSENT) is _ABSENT:
                return
            if len(found) == 1:
                by_key[key] = next(iter(found.items()))
            elif not found:
                del by_key[key]
        if self.delta is not None:
            self.delta.unlink((relation, key, value))

    def get(self, relation: Relation, key: Hashable) -> Linked:
        """The linked values of `key` (read-only)."""
        return _read(self._maps[relation].get(key))

    def reader(self, relation: Relation) -> Callable[[Hashable], Linked]:
        """`get` of one relation, for a caller that reads many keys of it."""
        by_key = self._maps[relation]
        return lambda key: _read(by_key.get(key))

    def mapping(self, relation: Relation) -> Mapping[Hashable, Linked]:
        """The whole map of one relation (read-only), for stores and tests."""
        return _RelationView(self._maps[relation])
