"""`ClaimsBy`: a key (a pod, a PodGroup) -> the claims linked to it, kept compact.

The claim side of the index keeps, for every pod, the claims whose status.reservedFor names
it, and for every PodGroup the claims reserved for the group (service.model.claims_index).
Almost every pod consumes one claim: a set per pod (216 bytes each, 40,000 of them at 5,000
nodes) would hold a single key. So a key linked to one claim maps to that claim's key itself,
and to a set only while it links several. Readers see an iterable of claim keys either way.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterator
from typing import Generic, TypeVar

from dra_mirror.service.model.records import ObjectKey

K = TypeVar("K", bound=Hashable)


class ClaimsBy(Generic[K]):
    """key -> the claim keys linked to it (one claim held as itself, several as a set)."""

    __slots__ = ("_map",)

    def __init__(self) -> None:
        self._map: dict[K, ObjectKey | set[ObjectKey]] = {}

    def add(self, key: K, claim: ObjectKey) -> None:
        found = self._map.get(key)
        if found is None:
            self._map[key] = claim
        elif isinstance(found, set):
            found.add(claim)
        elif found != claim:
            self._map[key] = {found, claim}

    def discard(self, key: K, claim: ObjectKey) -> None:
        found = self._map.get(key)
        if found is None:
            return
        if isinstance(found, set):
            found.discard(claim)
            if len(found) == 1:
                self._map[key] = next(iter(found))
        elif found == claim:
            del self._map[key]

    def get(self, key: K) -> Collection[ObjectKey]:
        """The claims linked to `key` (empty when none)."""
        found = self._map.get(key)
        if found is None:
            return ()
        return found if isinstance(found, set) else (found,)

    def items(self) -> Iterator[tuple[K, Collection[ObjectKey]]]:
        for key, found in self._map.items():
            yield key, (found if isinstance(found, set) else (found,))

    def __len__(self) -> int:
        return len(self._map)
