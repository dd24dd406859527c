"""Equal values of the objects decoded together, kept as one object each.

A 5,000-node cluster's slices name the same product, driver version and memory size for
40,000 devices, its 40,000 allocated claims carry 5,000 distinct node selectors (one per
node), the same annotation and the same finalizer, and the pods of one workload the same
labels and container resources. `SharedValues` hands out one object per distinct value to the
objects converted with it (a watcher keeps one for its kind, across pages, relists and watch
events; without one, each LIST page or event gets a fresh one): the cluster's records take
about a third less memory, and converting costs less (a dictionary lookup instead of building
the value).

Each table is bounded (`limit` entries; a full table starts over), so values that never repeat
(device uuids, nodes long gone) cannot grow it without end.

Promises: only values that nothing can change are shared — frozen records whose fields hold
strings, numbers and booleans, string maps (labels, annotations, quantities, an empty map for
every field without values: one per `SharedValues`) and raw node selectors, which records keep
only to serve and record them (records are immutable trees; nothing writes into them).
Equality, encoding and every field value are exactly those of unshared records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from sys import intern
from typing import Any, NamedTuple, TypeVar

from msgspec import Struct

from dra_mirror.service.model import api
from dra_mirror.service.model.metadata import qualify, quantity_text
from dra_mirror.service.model.records import Attribute, Capacity

_T = TypeVar("_T")
# How many recent wire values `converted` compares a new one with.
_RECENT = 4
_LIST_FORMS = ("ints", "bools", "strings", "versions")
# Map values up to this long are shared between records (sys.intern); longer ones are text.
_SHORT = 64


class DeviceLayout(NamedTuple):
    """The keys a device writes, qualified once for every device of its driver that writes
    the same attribute and capacity names in the same order."""

    attributes: tuple[str, ...]  # qualified, in the order written
    capacities: tuple[str, ...]
    unqualified: frozenset[str]  # the qualified keys written without their domain
    uuid: str | None  # `<driver>/uuid` when the device writes it


class SharedValues:
    """One object per distinct attribute value, plain capacity, device key layout, string map,
    quantity map, string tuple and node-local node selector, for the objects converted with
    it."""

    def __init__(self, *, limit: int = 65_536, map_limit: int = 4_096) -> None:
        self.limit = limit
        # Maps are often one per object (a node's hostname label, a pod's own name in a
        # StatefulSet's labels): their tables keep fewer, the repeated ones come back soon.
        self.map_limit = min(map_limit, limit)
        self.attributes: dict[tuple[str, Any], Attribute] = {}
        self.capacities: dict[str, Capacity] = {}
        self.keys: dict[tuple[str, str], str] = {}
        self.layouts: dict[tuple[str, tuple[str, ...], tuple[str, ...]], DeviceLayout] = {}
        self.selectors: dict[str, dict[str, Any]] = {}
        self.name_sets: dict[frozenset[str], frozenset[str]] = {}
        self.maps: dict[tuple[tuple[str, Any], ...], dict[str, Any]] = {}
        self.quantity_maps: dict[tuple[tuple[str, Any], ...], dict[str, str]] = {}
        self.tuples: dict[tuple[str, ...], tuple[str, ...]] = {}
        self.capacity_maps: dict[tuple[tuple[str, ...], tuple[Capacity, ...]], Any] = {}
        self.recent: dict[Any, list[tuple[Any, Any]]] = {}
        # The map of every field without values (labels, capacity, consumedCapacity…).
        self.empty: dict[str, Any] = {}

    def _room(self, table: dict[Any, Any], limit: int = 0) -> dict[Any, Any]:
        if len(table) >= (limit or self.limit):
            table.clear()
        return table

    def key(self, key: str, driver: str) -> str:
        """`qualify(key, driver)`, one string per distinct result."""
        found = self.keys.get((driver, key))
        if found is None:
            found = self._room(self.keys)[(driver, key)] = intern(qualify(key, driver))
        return found

    def layout(
        self, driver: str, attributes: tuple[str, ...], capacities: tuple[str, ...]
    ) -> DeviceLayout:
        """The qualified keys of a device of `driver` writing these attribute and capacity
        names (the devices of one driver write the same names)."""
        found = self.layouts.get((driver, attributes, capacities))
        if found is None:
            key = self.key
            qualified = tuple(key(n, driver) for n in attributes)
            unqualified = [key(n, driver) for n in attributes if "/" not in n]
            unqualified += [key(n, driver) for n in capacities if "/" not in n]
            uuid = key("uuid", driver)
            found = DeviceLayout(
                qualified,
                tuple(key(n, driver) for n in capacities),
                self.names(frozenset(unqualified)) if unqualified else frozenset(),
                uuid if uuid in qualified else None,
            )
            self._room(self.layouts)[(driver, attributes, capacities)] = found
        return found

    def names(self, names: frozenset[str]) -> frozenset[str]:
        """`names`, or an equal set already seen (the devices of one driver write the same
        keys without their domain)."""
        found = self.name_sets.get(names)
        if found is None:
            found = self._room(self.name_sets)[names] = names
        return found

    def strings(self, values: dict[str, str] | None) -> dict[str, str]:
        """A string map (labels, annotations, a node selector) with its keys and short values
        interned, or an equal map already seen."""
        if not values:
            return self.empty
        found = self.maps.get(tuple(values.items()))
        if found is None:
            found = {
                intern(key): intern(value) if len(value) <= _SHORT else value
                for key, value in values.items()
            }
            self._room(self.maps, self.map_limit)[tuple(found.items())] = found
        return found

    def quantities(self, values: dict[str, api.Quantity] | None) -> dict[str, str]:
        """A map of quantities as Kubernetes strings (`quantity_text`), or an equal map
        already seen."""
        if not values:
            return self.empty
        found = self.quantity_maps.get(tuple(values.items()))
        if found is None:
            found = {intern(name): quantity_text(v) for name, v in values.items()}
            # Only maps written as text are looked up again: 1 and True are equal keys.
            if all(type(v) is str for v in values.values()):
                self._room(self.quantity_maps, self.map_limit)[tuple(found.items())] = found
        return found

    def tuple_of(self, values: list[str] | None) -> tuple[str, ...]:
        """A list of short API strings (finalizers, condition types) as an interned tuple, or
        an equal tuple already seen."""
        if not values:
            return ()
        written = tuple(values)
        found = self.tuples.get(written)
        if found is None:
            found = tuple(map(intern, written))
            self._room(self.tuples)[found] = found
        return found

    def attribute(self, value: api.DeviceAttribute) -> Attribute:
        # Scalar members first (the first set member wins), then the 1.36+ list forms.
        found: tuple[str, Any]
        if value.int_ is not None:
            found = ("int", value.int_)
        elif value.bool_ is not None:
            found = ("bool", value.bool_)
        elif value.string is not None:
            found = ("string", value.string)
        elif value.version is not None:
            found = ("version", value.version)
        else:
            for kind in _LIST_FORMS:
                members = getattr(value, kind)
                if members is not None:
                    return Attribute(type=kind, value=list(members))
            raise ValueError("an attribute with no value")
        attribute = self.attributes.get(found)
        if attribute is None:
            attribute = Attribute(type=found[0], value=found[1])
            self._room(self.attributes)[found] = attribute
        return attribute

    def capacity(self, value: api.DeviceCapacity | api.Quantity) -> Capacity:
        if isinstance(value, api.DeviceCapacity):
            if value.request_policy is not None:
                return Capacity(
                    value=quantity_text(value.value), request_policy=value.request_policy
                )
            value = value.value
        text = quantity_text(value)
        capacity = self.capacities.get(text)
        if capacity is None:
            capacity = self._room(self.capacities)[text] = Capacity(value=text)
        return capacity

    def converted(
        self,
        wire: Struct | list[Any],
        convert: Callable[[Any, SharedValues], _T],
        exact: Callable[[Any], bool],
    ) -> _T:
        """`convert(wire, self)`, or what it gave for one of the last few equal wire values
        (the claims made from one template have the same spec). Only values that `exact`
        accepts are kept — those without untyped JSON, where equal also means encoded alike
        (`1`, `1.0` and `true` are equal in Python)."""
        recent = self.recent.get(convert)
        if recent is None:
            recent = self.recent[convert] = []
        for seen, result in recent:
            if seen == wire:
                return result  # type: ignore[no-any-return]
        result = convert(wire, self)
        if exact(wire):
            recent.insert(0, (wire, result))
            del recent[_RECENT:]
        return result

    def capacity_map(
        self, keys: tuple[str, ...], values: Iterable[api.DeviceCapacity | api.Quantity]
    ) -> dict[str, Capacity]:
        """A device's capacities under their qualified `keys`, or an equal map already seen
        (a capacity with a request policy is never shared, nor a map holding one)."""
        capacities = tuple(map(self.capacity, values))
        try:
            found: dict[str, Capacity] | None = self.capacity_maps.get((keys, capacities))
        except TypeError:  # a request policy (a dict) makes it unhashable
            return dict(zip(keys, capacities, strict=True))
        if found is None:
            found = dict(zip(keys, capacities, strict=True))
            self._room(self.capacity_maps, self.map_limit)[(keys, capacities)] = found
        return found

    def node_selector(self, raw: dict[str, Any], node: str) -> dict[str, Any]:
        """`raw`, or an equal selector already seen: the scheduler writes the same one-term
        `matchFields metadata.name In [node]` selector for every claim on `node`."""
        seen = self.selectors.get(node)
        if seen is not None and seen == raw:
            return seen
        if seen is None:
            self._room(self.selectors)[node] = raw
        return raw
