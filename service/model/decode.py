"""The hot path: raw API bytes (a LIST page, a WATCH line) straight into records.

Each item is kept as `msgspec.Raw` by the envelope decoder and then decoded on its own into the
typed wire Struct of its kind (`service.model.api`, only the fields the mirror needs), so:

* a 40,000-object list decodes without building 40,000 dicts;
* one malformed item costs only itself: it is reported as a `MalformedObject` naming it
  (`cluster/Kind/namespace/name`, read from whatever of its metadata parses) and every other
  item of the page is decoded;
* decoding agrees with `normalize` on the same object: both convert through `record_of`;
* the objects decoded with one `SharedValues` share their equal values (`service.model.sharing`;
  the watchers keep one per kind).

A body that is not a Kubernetes list/watch envelope at all raises `MalformedObject` (ref
`cluster/Kind`): there is nothing to salvage from it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec

from dra_mirror.service.model import api
from dra_mirror.service.model.kinds import REGISTERED
from dra_mirror.service.model.metadata import MalformedObject, object_ref
from dra_mirror.service.model.normalize import WIRE_TYPES, record_of
from dra_mirror.service.model.records import Record
from dra_mirror.service.model.sharing import SharedValues

# Watch event types (watch.EventType in apimachinery).
ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"
BOOKMARK = "BOOKMARK"
ERROR = "ERROR"


class ListPage(NamedTuple):
    records: list[Record]
    malformed: list[MalformedObject]
    resource_version: str
    continue_token: str | None


class WatchItem(NamedTuple):
    type: str  # ADDED / MODIFIED / DELETED / BOOKMARK / ERROR
    record: Record | None
    resource_version: str
    error: dict[str, Any] | None  # the Status object of an ERROR event (e.g. code 410)
    malformed: MalformedObject | None


class _ListBody(msgspec.Struct):
    metadata: api.ListMeta | None = None
    items: list[msgspec.Raw] | None = None


class _WatchLine(msgspec.Struct):
    type: str
    object: msgspec.Raw = msgspec.Raw(b"null")


_LIST = msgspec.json.Decoder(_ListBody)
_WATCH = msgspec.json.Decoder(_WatchLine)
_NAMED = msgspec.json.Decoder(api.NamedOnly)
_ANY = msgspec.json.Decoder()
_OBJECTS: dict[str, msgspec.json.Decoder[Any]] = {
    kind: msgspec.json.Decoder(wire) for kind, wire in WIRE_TYPES.items()
}


def _version_of(item: bytes | msgspec.Raw) -> str:
    """A broken item's own resourceVersion, where its metadata can be read ("" otherwise)."""
    try:
        metadata = _NAMED.decode(item).metadata
    except msgspec.DecodeError:
        return ""
    return metadata.resource_version if metadata else ""


def _ref_of(kind: str, item: bytes | msgspec.Raw, cluster: str) -> str:
    """Name a broken item from whatever of its metadata can be read."""
    entry = REGISTERED.get(kind)
    namespaced = entry is None or entry.namespaced
    try:
        return object_ref(cluster, kind, _NAMED.decode(item).metadata, namespaced=namespaced)
    except msgspec.DecodeError:
        pass
    try:
        metadata = _ANY.decode(item).get("metadata") or {}
        meta = api.ObjectMeta(
            name=str(metadata.get("name") or ""), namespace=str(metadata.get("namespace") or "")
        )
        return object_ref(cluster, kind, meta, namespaced=namespaced)
    except (msgspec.DecodeError, AttributeError):
        return object_ref(cluster, kind, None, namespaced=namespaced)


def decode_object(
    kind: str, item: bytes | msgspec.Raw, *, cluster: str, shared: SharedValues | None = None
) -> Record:
    """One object's JSON into its record; MalformedObject when it is wrong."""
    decoder = _OBJECTS.get(kind)
    if decoder is None:
        raise MalformedObject(f"{cluster}/{kind}", f"not a mirrored kind: {kind}")
    try:
        wire = decoder.decode(item)
    except msgspec.DecodeError as error:
        raise MalformedObject(_ref_of(kind, item, cluster), str(error)) from error
    return record_of(kind, wire, cluster=cluster, shared=shared)


def decode_list(
    kind: str, body: bytes, *, cluster: str, shared: SharedValues | None = None
) -> ListPage:
    """One LIST response page: its records, its malformed items, resourceVersion, continue.
    Records converted with the same `shared` share equal values (a fresh one by default)."""
    try:
        page = _LIST.decode(body)
    except msgspec.DecodeError as error:
        raise MalformedObject(f"{cluster}/{kind}", f"not a list: {error}") from error
    records: list[Record] = []
    malformed: list[MalformedObject] = []
    decoder = _OBJECTS.get(kind)
    if decoder is None:
        malformed.extend(
            MalformedObject(f"{cluster}/{kind}", f"not a mirrored kind: {kind}")
            for _item in page.items or ()
        )
    else:
        shared = shared or SharedValues()
        add = records.append
        for item in page.items or ():
            try:
                wire = decoder.decode(item)
            except msgspec.DecodeError as error:
                ref = _ref_of(kind, item, cluster)
                malformed.append(MalformedObject(ref, str(error), _version_of(item)))
                continue
            try:
                add(record_of(kind, wire, cluster=cluster, shared=shared))
            except MalformedObject as error:
                malformed.append(error.at(_version_of(item)))
    metadata = page.metadata or api.ListMeta()
    return ListPage(records, malformed, metadata.resource_version, metadata.continue_ or None)


def decode_watch_line(
    kind: str, line: bytes, *, cluster: str, shared: SharedValues | None = None
) -> WatchItem:
    """One line of a WATCH stream (one JSON event) into a WatchItem."""
    try:
        event = _WATCH.decode(line)
    except msgspec.DecodeError as error:
        raise MalformedObject(f"{cluster}/{kind}", f"not a watch event: {error}") from error
    obj = event.object
    if event.type == ERROR:
        try:
            status = _ANY.decode(obj)
        except msgspec.DecodeError:
            status = None
        return WatchItem(ERROR, None, "", status if isinstance(status, dict) else {}, None)
    if event.type == BOOKMARK:
        try:
            metadata = _NAMED.decode(obj).metadata
        except msgspec.DecodeError as error:
            raise MalformedObject(f"{cluster}/{kind}", f"bad bookmark: {error}") from error
        return WatchItem(BOOKMARK, None, metadata.resource_version if metadata else "", None, None)
    try:
        record = decode_object(kind, obj, cluster=cluster, shared=shared)
    except MalformedObject as error:
        try:
            metadata = _NAMED.decode(obj).metadata
            version = metadata.resource_version if metadata else ""
        except msgspec.DecodeError:
            version = ""
        return WatchItem(event.type, None, version, None, error)
    return WatchItem(event.type, record, record.meta.resource_version, None, None)
