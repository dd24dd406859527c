"""Equal values of the objects decoded together, kept as one object each.

A 5,000-node cluster's slices name the same product, driver version and memory size for
40,000 devices, and its 40,000 allocated claims carry 5,000 distinct node selectors (one per
node). `SharedValues` hands out one object per distinct value to the objects converted with it
(a watcher keeps one for its kind, across pages, relists and watch events; without one, each
LIST page or event gets a fresh one): the cluster's records take about a third less memory,
and converting costs no more (a dictionary lookup instead of building the value).

Each table is bounded (`limit` entries; a full table starts over), so values that never repeat
(device uuids, nodes long gone) cannot grow it without end.

Promises: only values that nothing can change are shared — frozen records whose fields hold
strings, numbers and booleans, and raw node selectors, which records keep only to serve and
record them (records are immutable trees; nothing writes into them). Equality, encoding and
every field value are exactly those of unshared records.
"""

from __future__ import annotations

from sys import intern
from typing import Any

from dra_mirror.service.model import api
from dra_mirror.service.model.metadata import qualify, quantity_text
from dra_mirror.service.model.records import Attribute, Capacity

_LIST_FORMS = ("ints", "bools", "strings", "versions")


class SharedValues:
    """One object per distinct attribute value, plain capacity, qualified key and node-local
    node selector, for the objects converted with it."""

    def __init__(self, *, limit: int = 65_536) -> None:
        self.limit = limit
        self.attributes: dict[tuple[str, Any], Attribute] = {}
        self.capacities: dict[str, Capacity] = {}
        self.keys: dict[tuple[str, str], str] = {}
        self.selectors: dict[str, dict[str, Any]] = {}

    def _room(self, table: dict[Any, Any]) -> dict[Any, Any]:
        if len(table) >= self.limit:
            table.clear()
        return table

    def key(self, key: str, driver: str) -> str:
        """`qualify(key, driver)`, one string per distinct result."""
        found = self.keys.get((driver, key))
        if found is None:
            found = self._room(self.keys)[(driver, key)] = intern(qualify(key, driver))
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

    def node_selector(self, raw: dict[str, Any], node: str) -> dict[str, Any]:
        """`raw`, or an equal selector already seen: the scheduler writes the same one-term
        `matchFields metadata.name In [node]` selector for every claim on `node`."""
        seen = self.selectors.get(node)
        if seen is not None and seen == raw:
            return seen
        if seen is None:
            self._room(self.selectors)[node] = raw
        return raw
