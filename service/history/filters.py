"""Which history rows a question reads: the rows an asker's scope shows (`visible`), the
rows naming a device (`name_filters`), the rows of resolved devices (`device_filter`).

Pure SQLAlchemy expressions over the history tables; the queries (`service.history.queries`)
combine them. A scope is what `Visibility` describes (`service.access.scope.AccessScope`, or
the graph's `schema.reader.Scope`); one that can say its grants (`Granting`) is filtered in
SQL, before any limit.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Protocol, runtime_checkable

from sqlalchemy import ColumnElement, and_, false, or_, true

from dra_mirror.service.history.spans import DeviceIdentity

ANY = "*"
# What an asker may see of namespaced rows: cluster (ANY: every cluster) -> namespaces (ANY in
# them: every namespace) — the shape of `service.access.scope.AccessScope.grants`.
Grants = Mapping[str, Collection[str]]


class Visibility(Protocol):
    """What the history asks of an asker's access scope (`service.access.scope.AccessScope`,
    or the graph's `schema.reader.Scope`)."""

    def allows(self, cluster: str, namespace: str = "") -> bool: ...

    def may_hide(self) -> bool: ...


@runtime_checkable
class Granting(Visibility, Protocol):
    def namespace_grants(self) -> Grants | None:
        """The grants as `Grants`, or None when every namespace of every cluster is shown."""
        ...


def visible(table: Any, grants: Grants | None) -> ColumnElement[bool]:
    """The rows of `table` (with `cluster` and `namespace` columns) that `grants` shows: for
    each cluster (`*`: any), its namespaces (`*`: every one); a cluster granted no namespace
    shows none of its namespaced rows. None shows everything."""
    if grants is None:
        return true()
    clauses = []
    for cluster, namespaces in sorted(grants.items()):
        if not namespaces:
            continue
        in_cluster = [] if cluster == ANY else [table.cluster == cluster]
        if ANY in namespaces:
            clauses.append(and_(true(), *in_cluster))
        else:
            clauses.append(and_(table.namespace.in_(sorted(namespaces)), *in_cluster))
    return or_(false(), *clauses)


def name_filters(device: str) -> list:
    """Conditions (per table) naming the device, in the order to try them."""
    parts = device.split("/")
    if len(parts) >= 3:
        driver, name, pool = parts[0], parts[-1], "/".join(parts[1:-1])
        return [lambda t: and_(t.driver == driver, t.pool == pool, t.device == name)]
    if len(parts) == 2:
        return [lambda t: and_(t.node == parts[0], t.device == parts[1])]
    return [lambda t: t.uuid == device, lambda t: t.device == device]


def device_filter(table: Any, identities: list[DeviceIdentity]) -> ColumnElement[bool]:
    """Rows of these devices: by uuid where one is known, and by (cluster, driver, pool,
    device) the rows that carry no uuid (an allocation recorded before any slice published its
    device, when the allocation result alone named it). A uuid is followed within the cluster
    it was found in: the same GPU in another cluster (moved, or mirrored twice) is that
    cluster's device."""
    uuids: dict[str, set[str]] = {}
    for d in identities:
        if d.uuid:
            uuids.setdefault(d.cluster, set()).add(d.uuid)
    clauses = [
        and_(table.cluster == cluster, table.uuid.in_(sorted(found)))
        for cluster, found in sorted(uuids.items())
    ]
    for d in identities:
        by_key = and_(table.cluster == d.cluster, table.driver == d.driver, table.pool == d.pool,
                      table.device == d.device)  # fmt: skip
        clauses.append(and_(by_key, table.uuid.is_(None)) if d.uuid else by_key)
    return or_(*clauses)
