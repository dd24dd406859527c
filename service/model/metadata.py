"""Object metadata and the small value rules every normalizer shares.

Promises:

* `MalformedObject` is the ONLY error normalizing and decoding raise: it names the object
  (`cluster/Kind/namespace/name`, as far as it could be read) and says what was wrong, never
  carrying the body (STYLE.md: bad input is logged once with its reference, then skipped);
* `object_meta` drops managedFields (they are never declared), forces the namespace of
  cluster-scoped kinds to "" (round-trip data sets one; the API server ignores it), puts a
  namespaced manifest without a namespace in "default" (as kubectl does) and refuses an object
  without a name;
* `qualify` gives an unqualified attribute/capacity key the driver's domain, as the API server's
  CEL environment does (`productName` of `gpu.nvidia.com` is `gpu.nvidia.com/productName`).
"""

from __future__ import annotations

from typing import Any

from dra_mirror.service.model import api
from dra_mirror.service.model.records import NAMESPACED_KINDS, Meta, ObjectKey, OwnerRef


class MalformedObject(ValueError):
    """An object from a cluster that cannot be normalized: counted, logged once, skipped."""

    def __init__(self, ref: str, reason: str) -> None:
        super().__init__(f"{ref}: {reason}")
        self.ref = ref
        self.reason = reason

    def __reduce__(self) -> tuple[Any, ...]:
        return (MalformedObject, (self.ref, self.reason))


def object_ref(cluster: str, kind: str, metadata: api.ObjectMeta | None) -> str:
    """`cluster/Kind/namespace/name` from whatever metadata could be read."""
    name = (metadata.name if metadata else "") or "?"
    namespace = metadata.namespace if metadata and kind in NAMESPACED_KINDS else ""
    return ObjectKey(cluster, kind, namespace, name).ref()


def object_meta(kind: str, metadata: api.ObjectMeta, *, cluster: str) -> Meta:
    """The served parts of ObjectMeta; raises MalformedObject for an object without a name."""
    if not metadata.name:
        raise MalformedObject(object_ref(cluster, kind, metadata), "metadata.name is missing")
    namespaced = kind in NAMESPACED_KINDS
    owners = tuple(
        OwnerRef(
            kind=o.kind,
            name=o.name,
            uid=o.uid,
            controller=bool(o.controller),
            api_version=o.api_version,
        )
        for o in metadata.owner_references or ()
    )
    return Meta(
        cluster=cluster,
        name=metadata.name,
        # The API server always sets it; a manifest without one lands in kubectl's "default".
        namespace=(metadata.namespace or "default") if namespaced else "",
        uid=metadata.uid,
        resource_version=metadata.resource_version,
        generation=metadata.generation,
        created_at=metadata.creation_timestamp,
        deleted_at=metadata.deletion_timestamp,
        labels=dict(metadata.labels or {}),
        annotations=dict(metadata.annotations or {}),
        owners=owners,
        finalizers=tuple(metadata.finalizers or ()),
        generate_name=metadata.generate_name,
    )


def quantity_text(value: api.Quantity) -> str:
    """A quantity as the Kubernetes string; YAML numbers (hand-written manifests) become text."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def quantities(values: dict[str, api.Quantity] | None) -> dict[str, str]:
    return {name: quantity_text(v) for name, v in (values or {}).items()}


def qualify(key: str, driver: str) -> str:
    """A fully qualified attribute/capacity name: unqualified keys are in the driver's domain."""
    return key if "/" in key else f"{driver}/{key}"


def selector_node(node_selector: dict[str, Any] | None) -> str | None:
    """The node a node-local NodeSelector names, else None.

    The scheduler writes the allocation of node-local devices as exactly one term
    `matchFields: [{key: metadata.name, operator: In, values: [<node>]}]`; anything wider
    (labels, several nodes) is not one node.
    """
    if not node_selector:
        return None
    terms: Any = node_selector.get("nodeSelectorTerms") or ()
    if len(terms) != 1 or not isinstance(terms[0], dict):
        return None
    term = terms[0]
    fields: Any = term.get("matchFields") or ()
    if term.get("matchExpressions") or len(fields) != 1 or not isinstance(fields[0], dict):
        return None
    field = fields[0]
    values: Any = field.get("values") or ()
    if field.get("key") == "metadata.name" and field.get("operator") == "In" and len(values) == 1:
        return str(values[0])
    return None


def cel_expressions(selectors: list[api.DeviceSelector] | None) -> tuple[str, ...]:
    return tuple(s.cel.expression for s in selectors or () if s.cel is not None)
