"""Paged LIST over a `ClusterStore`, with kube-apiserver's continue-token semantics.

A list is served from a consistent snapshot, as etcd gives kube-apiserver: the first page
fixes the resourceVersion; later pages (via `continue`) serve the state at that version,
rebuilt from the store's event log, so objects changed meanwhile appear as they were. A
continue token whose version has left the retained window, or that predates a restart,
gets 410 Expired — the client must start a new list.

The token is opaque to clients; like the real one it is base64 of a small JSON document
(`{"v": "meta.k8s.io/v1", "rv": …, "start": …}`) plus the store's restart epoch.
`remainingItemCount` is given only for unfiltered lists, as on a real server.
"""

from __future__ import annotations

import base64
import bisect
from collections.abc import Callable, Iterator
from typing import NamedTuple

import orjson

from dra_mirror.service.sim.errors import ApiError, bad_request, expired
from dra_mirror.service.sim.store import ClusterStore, Key

_CONTINUE_TOO_OLD = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter, or use the continue token "
    "in this response to retrieve the remainder of the results. Continuing with the "
    "provided token results in an inconsistent list - objects that were created, modified, "
    "or deleted between the time the first chunk was returned and now may show up in the list."
)


class Page(NamedTuple):
    """One page: (key, object, is_current) triples in key order, and the list metadata."""

    items: list[tuple[Key, dict, bool]]
    resource_version: int
    continue_token: str
    remaining: int | None


def encode_token(epoch: int, rv: int, start: Key) -> str:
    doc = {"v": "meta.k8s.io/v1", "rv": rv, "start": f"{start[0]}/{start[1]}", "e": epoch}
    return base64.urlsafe_b64encode(orjson.dumps(doc)).decode().rstrip("=")


def decode_token(token: str) -> tuple[int, int, Key]:
    try:
        doc = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        namespace, _, name = str(doc["start"]).partition("/")
        return int(doc["e"]), int(doc["rv"]), (namespace, name)
    except (ValueError, KeyError, TypeError) as error:
        raise bad_request(f"continue key is not valid: {error}") from error


def snapshot_version(store: ClusterStore, rv: str | None, rv_match: str | None) -> int:
    """The resourceVersion a new list serves, per `resourceVersion`/`resourceVersionMatch`."""
    if rv_match not in (None, "", "Exact", "NotOlderThan"):
        raise bad_request(f"unsupported resourceVersionMatch: {rv_match!r}")
    if rv_match and not rv:
        raise bad_request("resourceVersionMatch is forbidden unless resourceVersion is provided")
    if not rv or rv == "0":
        return store.resource_version
    try:
        wanted = int(rv)
    except ValueError as error:
        raise bad_request(f"invalid resource version: {rv!r}") from error
    if wanted > store.resource_version:
        raise ApiError(
            504,
            "Timeout",
            f"Too large resource version: {wanted}, current: {store.resource_version}",
            {
                "causes": [
                    {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
                ],
                "retryAfterSeconds": 1,
            },
        )
    if rv_match == "Exact":
        if wanted < store.floor:
            raise expired(f"too old resource version: {wanted} ({store.floor})")
        return wanted
    return store.resource_version


def list_page(
    store: ClusterStore,
    plural: str,
    namespace: str | None,
    *,
    limit: int = 0,
    continue_token: str = "",
    rv: str | None = None,
    rv_match: str | None = None,
    matches: Callable[[dict], bool] | None = None,
) -> Page:
    """One page of `plural` (in `namespace`, or all), filtered by `matches`."""
    if continue_token:
        if rv not in (None, "", "0") or rv_match:
            raise bad_request("specifying resource version is not allowed when using continue")
        epoch, at, start = decode_token(continue_token)
        if epoch != store.epoch or at < store.floor:
            raise expired(_CONTINUE_TOO_OLD)
        after: Key | None = start
    else:
        at = snapshot_version(store, rv, rv_match)
        after = None
    past = store.state_at(plural, at) if at < store.resource_version else {}
    keys = store.sorted_keys(plural)
    if namespace:
        lo = bisect.bisect_left(keys, (namespace, ""))
        hi = bisect.bisect_left(keys, (namespace + "\x00", ""))
    else:
        lo, hi = 0, len(keys)
    if after is not None:
        lo = max(lo, bisect.bisect_right(keys, after))
    extra = sorted(
        k for k in past if (not namespace or k[0] == namespace) and (after is None or k > after)
    )
    items: list[tuple[Key, dict, bool]] = []
    last: Key | None = None
    more = False
    for key in _merge(keys, lo, hi, extra):
        if key in past:
            obj, current = past[key], False
            if obj is None:
                continue
        else:
            obj, current = store.stored(plural, key), True
            if obj is None:
                continue
        if matches is not None and not matches(obj):
            continue
        if limit and len(items) >= limit:
            more = True
            break
        items.append((key, obj, current))
        last = key
    token = encode_token(store.epoch, at, last) if more and last is not None else ""
    remaining = None
    if more and matches is None and last is not None:
        remaining = _count_after(keys, hi, last, past, namespace)
    return Page(items, at, token, remaining)


def _merge(keys: list[Key], lo: int, hi: int, extra: list[Key]) -> Iterator[Key]:
    """Sorted union of keys[lo:hi] and `extra` (sorted), each key once."""
    j = 0
    for i in range(lo, hi):
        key = keys[i]
        while j < len(extra) and extra[j] < key:
            yield extra[j]
            j += 1
        if j < len(extra) and extra[j] == key:
            j += 1
        yield key
    yield from extra[j:]


def _count_after(
    keys: list[Key], hi: int, last: Key, past: dict[Key, dict | None], namespace: str | None
) -> int:
    count = hi - bisect.bisect_right(keys, last, 0, hi)
    for key, then in past.items():
        if key <= last or (namespace and key[0] != namespace):
            continue
        present_now = _contains(keys, key)
        if then is None and present_now:
            count -= 1
        elif then is not None and not present_now:
            count += 1
    return count


def _contains(keys: list[Key], key: Key) -> bool:
    i = bisect.bisect_left(keys, key)
    return i < len(keys) and keys[i] == key
