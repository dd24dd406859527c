"""What one batch changed in an index's DERIVED state: reverse-map entries, devices, idleness.

A store that keeps its indexes outside this process (Redis) needs more than the records of a
`Changes`: it needs to know which reverse-map entries, valid-pool devices and idle marks to
write or remove. Rather than re-deriving them (and drifting from the model), such a store folds
the Changes into its own `ClusterIndex(..., deltas=True)` and writes `take_delta()`.

Promises: entries are NET effects of the batch — for each (relation, key, value), device key
or claim key only its final state is kept (added with its payload, or removed), so the writer
may apply them in any order, in one transaction. A value added and removed within the batch is
reported removed (removing what is absent is harmless in every store).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dra_mirror.service.model.records import DeviceEntry, DeviceKey, ObjectKey


class _Removed:
    def __repr__(self) -> str:
        return "REMOVED"


REMOVED: Any = _Removed()


class IndexDelta:
    def __init__(self) -> None:
        # (relation, key, value) -> payload (None for set-like relations) or REMOVED
        self.links: dict[tuple[str, Any, Any], Any] = {}
        self.devices: dict[DeviceKey, DeviceEntry | None] = {}  # None: no longer valid
        self.idle: dict[ObjectKey, str | None] = {}  # claim -> idle since, or None: not idle

    def __bool__(self) -> bool:
        return bool(self.links or self.devices or self.idle)

    def links_added(self) -> Iterator[tuple[str, Any, Any, Any]]:
        """(relation, key, value, payload) now linked."""
        for (relation, key, value), payload in self.links.items():
            if payload is not REMOVED:
                yield relation, key, value, payload

    def links_removed(self) -> Iterator[tuple[str, Any, Any]]:
        """(relation, key, value) no longer linked."""
        for (relation, key, value), payload in self.links.items():
            if payload is REMOVED:
                yield relation, key, value
