"""`KeyOrder`: the keys of one of the index's maps in sorted order, kept, not recomputed.

The paged lists of the graph (claims, pods, devices) answer in key order. Sorting the 40,000
claims of a cluster on every request costs tens of milliseconds; a `KeyOrder` keeps the
sorted keys of one map (`ClusterIndex`'s records of a kind, its devices, its held and
unpublished devices) so that a page costs a bisect plus the page. It promises:

* `keys()` is exactly the sorted keys of the map as of the last settled batch (the index
  says which keys a batch may have added or removed with `touched`, before readers read);
* it costs nothing until someone reads it: the first `keys()` sorts the map once; after that
  each touched key costs O(log n) at the next read, and a read after many changes (a relist)
  sorts again, whichever is cheaper;
* it never holds a key the map does not: a touched key is looked up in the map itself, so a
  key added and removed within a batch, or removed and added again, comes out right.

`sortedcontainers.SortedList` (positional indexing and bisection in O(log n)) holds the order.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from itertools import accumulate, chain, count
from typing import Any, Generic, TypeVar, cast, overload
from weakref import WeakValueDictionary

from sortedcontainers import SortedList

from dra_mirror.service.model.records import DeviceEntry, DeviceKey, ObjectKey, Record

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_RESORT_FRACTION = 8  # more touched keys than 1/8 of the map: sorting anew is cheaper


class KeyOrder(Generic[K]):
    """The sorted keys of `source` (a map the index writes), kept up to date lazily."""

    __slots__ = ("_sorted", "_source", "_touched")

    def __init__(self, source: Mapping[K, Any]) -> None:
        self._source = source
        self._sorted: Any = None  # SortedList[K] once read
        self._touched: set[K] = set()

    def touched(self, keys: Iterable[K]) -> None:
        """Keys that may have been added to or removed from the map (nothing to do while
        nobody has read the order)."""
        if self._sorted is not None:
            self._touched.update(keys)

    def touch(self, key: K) -> None:
        if self._sorted is not None:
            self._touched.add(key)

    def keys(self) -> Sequence[K]:
        """The map's keys, sorted: a read-only sequence with O(log n) indexing and bisection
        (`bisect_left` / `bisect_right` of sortedcontainers)."""
        touched = self._touched
        if self._sorted is None or len(touched) * _RESORT_FRACTION > len(self._source):
            self._sorted = SortedList(self._source)
            touched.clear()
        elif touched:
            ordered, source = self._sorted, self._source
            for key in touched:
                present = key in source
                if present != (key in ordered):
                    if present:
                        ordered.add(key)
                    else:
                        ordered.remove(key)
            touched.clear()
        return cast(Sequence[K], self._sorted)


def bisect_left(keys: Sequence[K], key: Any) -> int:
    """Where `key` would go in `keys` (a `KeyOrder.keys()` answer), before equal keys."""
    return cast(int, cast(Any, keys).bisect_left(key))


class InOrder(Sequence[V]):
    """Values in key order: positions `lo`..`hi` of a kept order, each value looked up in the
    map when read, so a page costs its own values. The index freezes every live one (copies
    its values) before it folds its next batch: a reader holding it across an await still
    reads the state as of the moment it asked."""

    __slots__ = ("__weakref__", "_frozen", "_hi", "_keys", "_lo", "_lookup")

    def __init__(self, keys: Sequence[K], lookup: Callable[[K], V], lo: int, hi: int) -> None:
        self._keys: Sequence[Any] = keys
        self._lookup: Callable[[Any], V] = lookup
        self._lo, self._hi = lo, max(lo, hi)
        self._frozen: list[V] | None = None

    def freeze(self) -> None:
        if self._frozen is None:
            self._frozen = list(map(self._lookup, self._keys[self._lo : self._hi]))
            self._keys = ()

    def __len__(self) -> int:
        return len(self._frozen) if self._frozen is not None else self._hi - self._lo

    @overload
    def __getitem__(self, at: int) -> V: ...

    @overload
    def __getitem__(self, at: slice) -> list[V]: ...

    def __getitem__(self, at: int | slice) -> V | list[V]:
        if self._frozen is not None:
            return self._frozen[at]
        size = self._hi - self._lo
        if isinstance(at, slice):
            start, stop, step = at.indices(size)
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            return list(
                map(self._lookup, self._keys[self._lo + start : self._lo + max(start, stop)])
            )
        if at < 0:
            at += size
        if not 0 <= at < size:
            raise IndexError(at)
        return self._lookup(self._keys[self._lo + at])

    def __iter__(self) -> Iterator[V]:
        if self._frozen is not None:
            return iter(self._frozen)
        return iter(self[:])

    def __eq__(self, other: object) -> bool:
        """Equal to a list (or any sequence but a string) of the same values."""
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # a view of changing state: not hashable


class Chained(Sequence[V]):
    """Sequences one after the other (each cluster's records, clusters in name order)."""

    __slots__ = ("_ends", "_parts")

    def __init__(self, parts: Iterable[Sequence[V]]) -> None:
        self._parts = [p for p in parts if len(p)]
        self._ends = list(accumulate(len(p) for p in self._parts))

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    @overload
    def __getitem__(self, at: int) -> V: ...

    @overload
    def __getitem__(self, at: slice) -> list[V]: ...

    def __getitem__(self, at: int | slice) -> V | list[V]:
        size = len(self)
        if isinstance(at, slice):
            start, stop, step = at.indices(size)
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            out: list[V] = []
            begin = 0
            for part, end in zip(self._parts, self._ends, strict=True):
                if end > start and begin < stop:
                    out.extend(part[max(start - begin, 0) : min(stop, end) - begin])
                begin = end
            return out
        if at < 0:
            at += size
        if not 0 <= at < size:
            raise IndexError(at)
        which = bisect_right(self._ends, at)
        return self._parts[which][at - (self._ends[which - 1] if which else 0)]

    def __iter__(self) -> Iterator[V]:
        return chain.from_iterable(self._parts)

    def __eq__(self, other: object) -> bool:
        """Equal to a list (or any sequence but a string) of the same values."""
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # a view of changing state: not hashable


class IndexOrders:
    """The kept orders of one `ClusterIndex`: its records per kind, its devices (published)
    and its held, unpublished devices. The index touches a record's key when it adds or
    removes the record, hands the devices a batch touched when it settles, and calls
    `before_batch` before it changes anything."""

    __slots__ = ("_cluster", "_devices", "_maps", "_numbers", "_records", "_unpublished", "_views")

    def __init__(
        self,
        cluster: str,
        records: Mapping[str, Mapping[ObjectKey, Record]],
        devices: Mapping[DeviceKey, DeviceEntry],
        unpublished: Mapping[DeviceKey, DeviceEntry],
    ) -> None:
        self._cluster = cluster
        self._maps = (records, devices, unpublished)
        self._records = {kind: KeyOrder(objects) for kind, objects in records.items()}
        self._devices = KeyOrder(devices)
        self._unpublished = KeyOrder(unpublished)
        self._views: WeakValueDictionary[int, InOrder[Any]] = WeakValueDictionary()
        self._numbers = count()

    def touch(self, key: ObjectKey) -> None:
        self._records[key.kind].touch(key)

    def settled(self, devices: Iterable[DeviceKey]) -> None:
        """Devices whose entry (published or not) a settled batch may have added or removed."""
        self._devices.touched(devices)
        self._unpublished.touched(devices)

    def before_batch(self) -> None:
        """The index is about to change: every view still held keeps what it showed."""
        for view in list(self._views.values()):
            view.freeze()
        self._views.clear()

    def records(self, kind: str) -> Sequence[ObjectKey]:
        """The keys of every record of `kind`, sorted (namespace, then name)."""
        return self._records[kind].keys()

    def devices(self, *, published: bool = True) -> Sequence[DeviceKey]:
        """The keys of the devices slices publish (or, `published=False`, of those held and
        published by no slice), sorted (driver, pool, device)."""
        return (self._devices if published else self._unpublished).keys()

    def records_in_order(self, kind: str, *, namespace: str | None = None) -> InOrder[Record]:
        """Every record of `kind` (in `namespace`), in key order, as of now."""
        keys = self.records(kind)
        lo, hi = 0, len(keys)
        if namespace is not None:
            lo = bisect_left(keys, (self._cluster, kind, namespace))
            hi = bisect_left(keys, (self._cluster, kind, namespace + "\0"))
        return self._view(keys, self._maps[0][kind].__getitem__, lo, hi)

    def devices_in_order(
        self, *, published: bool = True, driver: str | None = None
    ) -> InOrder[DeviceEntry]:
        """Every published (or held, unpublished) device (of `driver`), in key order, now."""
        keys = self.devices(published=published)
        lo, hi = 0, len(keys)
        if driver is not None:
            lo = bisect_left(keys, (self._cluster, driver))
            hi = bisect_left(keys, (self._cluster, driver + "\0"))
        entries = self._maps[1] if published else self._maps[2]
        return self._view(keys, entries.__getitem__, lo, hi)

    def _view(self, keys: Sequence[K], lookup: Callable[[K], V], lo: int, hi: int) -> InOrder[V]:
        view = InOrder(keys, lookup, lo, hi)
        self._views[next(self._numbers)] = view
        return view
