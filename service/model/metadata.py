"""Object metadata and the small value rules every normalizer shares.

Promises:

* `MalformedObject` is the ONLY error normalizing and decoding raise: it names the object
  (`cluster/Kind/namespace/name`, as far as it could be read) and says what was wrong, never
  carrying the body (bad input is logged once with its reference, then skipped);
* `object_meta` drops managedFields (they are never declared), forces the namespace of
  cluster-scoped kinds to "" (round-trip data sets one; the API server ignores it), puts a
  namespaced manifest without a namespace in "default" (as kubectl does) and refuses an object
  without a name;
* the strings that repeat across objects (namespaces, names that other objects point at, the
  uids of pods and nodes, label and annotation keys and short values, finalizers, quantities)
  are interned
  (`sys.intern`): equal strings are one object, which a 100,000-object cluster notices in
  memory; values and equality are unchanged;
* `qualify` gives an unqualified attribute/capacity key the driver's domain, as the API server's
  CEL environment does (`productName` of `gpu.nvidia.com` is `gpu.nvidia.com/productName`).
"""

from __future__ import annotations

from sys import intern
from typing import Any, Protocol

from dra_mirror.service.model import api
from dra_mirror.service.model.records import NODE, POD, Meta, ObjectKey, OwnerRef

# Values up to this long are shared between records (sys.intern); longer ones are text.
_SHORT = 64
# Kinds whose uid other objects repeat (claims name their pods in ownerReferences and
# reservedFor, slices their nodes): only those uids are worth interning.
_REFERENCED_UIDS = frozenset({POD, NODE})


class SharedMaps(Protocol):
    """What `object_meta` asks of `service.model.sharing.SharedValues`."""

    def strings(self, values: dict[str, str] | None) -> dict[str, str]: ...

    def tuple_of(self, values: list[str] | None) -> tuple[str, ...]: ...


class MalformedObject(ValueError):
    """An object from a cluster that cannot be normalized: counted, logged once, skipped.

    `resource_version` is the object's own, where its metadata could be read ("" otherwise):
    one broken object is one report per version, however often a relist meets it."""

    def __init__(self, ref: str, reason: str, resource_version: str = "") -> None:
        super().__init__(f"{ref}: {reason}")
        self.ref = ref
        self.reason = reason
        self.resource_version = resource_version

    def at(self, resource_version: str) -> MalformedObject:
        """The same report, naming the object's resourceVersion."""
        return MalformedObject(self.ref, self.reason, resource_version)

    def __reduce__(self) -> tuple[Any, ...]:
        return (MalformedObject, (self.ref, self.reason, self.resource_version))


def object_ref(
    cluster: str, kind: str, metadata: api.ObjectMeta | None, *, namespaced: bool
) -> str:
    """`cluster/Kind/namespace/name` from whatever metadata could be read."""
    name = (metadata.name if metadata else "") or "?"
    namespace = metadata.namespace if metadata and namespaced else ""
    return ObjectKey(cluster, kind, namespace, name).ref()


def strings(values: dict[str, str] | None) -> dict[str, str]:
    """A string map (labels, annotations) with its keys and short values shared."""
    if not values:
        return {}
    return {
        intern(key): intern(value) if len(value) <= _SHORT else value
        for key, value in values.items()
    }


def strings_of(values: list[str] | None) -> tuple[str, ...]:
    """A list of short API strings (condition types, operation names), interned, as a tuple."""
    return tuple(intern(v) for v in values) if values else ()


def object_meta(
    kind: str,
    metadata: api.ObjectMeta,
    *,
    namespaced: bool,
    cluster: str,
    shared: SharedMaps | None = None,
) -> Meta:
    """The served parts of ObjectMeta of an object of `kind` (`namespaced` as the registry of
    kinds says); raises MalformedObject for an object without a name. With `shared` (a
    `service.model.sharing.SharedValues`), equal label and annotation maps and finalizer
    lists are one object."""
    name = metadata.name
    if not name:
        ref = object_ref(cluster, kind, metadata, namespaced=namespaced)
        raise MalformedObject(ref, "metadata.name is missing")
    # The API server always sets it; a manifest without one lands in kubectl's "default".
    namespace = intern(metadata.namespace or "default") if namespaced else ""
    references = metadata.owner_references
    owners = (
        tuple(
            OwnerRef(
                intern(o.kind),
                intern(o.name),
                intern(o.uid),
                bool(o.controller),
                intern(o.api_version),
            )
            for o in references
        )
        if references
        else ()
    )
    finalizers = metadata.finalizers
    if shared is None:
        labels = strings(metadata.labels)
        annotations = strings(metadata.annotations)
        written = tuple(map(intern, finalizers)) if finalizers else ()
    else:
        labels = shared.strings(metadata.labels)
        annotations = shared.strings(metadata.annotations)
        written = shared.tuple_of(finalizers)
    return Meta(
        cluster,
        intern(name),
        namespace,
        intern(metadata.uid) if kind in _REFERENCED_UIDS else metadata.uid,
        metadata.resource_version,
        metadata.generation,
        metadata.creation_timestamp,
        metadata.deletion_timestamp,
        labels,
        annotations,
        owners,
        written,
        metadata.generate_name,
    )


def quantity_text(value: api.Quantity) -> str:
    """A quantity as the Kubernetes string; YAML numbers (hand-written manifests) become text."""
    if isinstance(value, str):
        return intern(value)
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def quantities(values: dict[str, api.Quantity] | None) -> dict[str, str]:
    if not values:
        return {}
    return {intern(name): quantity_text(v) for name, v in values.items()}


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
