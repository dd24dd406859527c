"""What one batch changed in an index's DERIVED state: the part of a `Changes` a store persists.

Records alone do not say which reverse-map entries, valid-pool devices, device statuses and
idle marks a batch changed; the index does, once, and hands it on in `Changes.delta` so that a
store kept outside this process (Redis) writes it without an index of its own:

* `linked` / `unlinked` — reverse-map entries `(relation, from-key, value)` now linked (with
  their payload: the AllocationRef of a hold, else None) or no longer linked;
* `lists` — for every relation but the two with a large fan-out (`relations.FAN_OUT`), the
  full list of each from-key the batch touched, as the index answers it (sorted; holds in
  (claim, request, shareID) order), so a store may keep one value per from-key;
* `devices` — devices of a valid pool generation whose entry changed (None: no longer valid);
* `unpublished` — devices held but published by no slice whose entry changed (None: published
  again, or no longer held);
* `statuses` — devices whose status (free / held / shared / blocked) changed (None: gone);
* `idle` — claims that became idle (since when) or stopped being idle (None);
* `classes` — (DeviceClass name, device) pairs whose membership changed: True when the class
  now offers the (published) device, False when it no longer does (service.model.class_members;
  kept only by an index asked to, `ClusterIndex(class_members=True)`).

Promises: entries are NET effects of the batch — for each entry only its final state is kept,
so a writer may apply them in any order, in one transaction. A value added and removed within
the batch is reported removed (removing what is absent is harmless in every store). An index
that is itself the store (the in-memory store) leaves `linked`, `unlinked` and `lists` empty
(`ClusterIndex(link_deltas=False)`): nothing outside it keeps reverse maps.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any

from msgspec import Struct, field

from dra_mirror.service.model.records import DeviceEntry, DeviceKey, ObjectKey
from dra_mirror.service.model.relations import Relation

LinkEntry = tuple[Relation, Hashable, Hashable]  # (relation, from-key, value)


class IndexDelta(Struct):
    linked: dict[LinkEntry, Any] = field(default_factory=dict)  # -> payload (None: a set)
    unlinked: set[LinkEntry] = field(default_factory=set)
    lists: dict[tuple[Relation, Hashable], list[Any]] = field(default_factory=dict)
    devices: dict[DeviceKey, DeviceEntry | None] = field(default_factory=dict)
    unpublished: dict[DeviceKey, DeviceEntry | None] = field(default_factory=dict)
    statuses: dict[DeviceKey, str | None] = field(default_factory=dict)
    idle: dict[ObjectKey, str | None] = field(default_factory=dict)
    classes: dict[tuple[str, DeviceKey], bool] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(
            self.linked
            or self.unlinked
            or self.devices
            or self.unpublished
            or self.statuses
            or self.idle
            or self.classes
        )

    def link(self, entry: LinkEntry, payload: Any) -> None:
        self.unlinked.discard(entry)
        self.linked[entry] = payload

    def unlink(self, entry: LinkEntry) -> None:
        self.linked.pop(entry, None)
        self.unlinked.add(entry)

    def links_added(self) -> Iterator[tuple[Relation, Hashable, Hashable, Any]]:
        """(relation, key, value, payload) now linked."""
        for (relation, key, value), payload in self.linked.items():
            yield relation, key, value, payload

    def links_removed(self) -> Iterator[LinkEntry]:
        """(relation, key, value) no longer linked."""
        return iter(self.unlinked)

    def touched(self) -> set[tuple[Relation, Hashable]]:
        """Every (relation, from-key) whose values the batch changed."""
        found = {(relation, key) for relation, key, _ in self.linked}
        found.update((relation, key) for relation, key, _ in self.unlinked)
        return found
