"""Label and field selectors, parsed the way kube-apiserver parses them.

`parse_labels("app=web,tier!=db,env in (a,b),!legacy,gpu")` and
`parse_fields("spec.nodeName=n1,metadata.namespace!=x", plural)` each return a predicate
`obj -> bool`. Label selectors support `=`, `==`, `!=`, `in`, `notin`, `key` (exists) and
`!key`; field selectors support `=`, `==`, `!=` on the fields each resource registers
(`metadata.name`, `metadata.namespace`, and the per-resource ones below). An unsupported
field is a 400 BadRequest, as on a real server (`field label not supported: …`).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from dra_mirror.service.sim.errors import bad_request

Predicate = Callable[[dict], bool]

# Field selectors each resource registers (GetAttrs in the registry strategies).
FIELDS: dict[str, dict[str, Callable[[dict], str]]] = {
    "pods": {
        "spec.nodeName": lambda o: (o.get("spec") or {}).get("nodeName") or "",
        "status.phase": lambda o: (o.get("status") or {}).get("phase") or "",
        "spec.restartPolicy": lambda o: (o.get("spec") or {}).get("restartPolicy") or "",
        "spec.schedulerName": lambda o: (o.get("spec") or {}).get("schedulerName") or "",
        "spec.serviceAccountName": lambda o: (o.get("spec") or {}).get("serviceAccountName") or "",
        "status.podIP": lambda o: (o.get("status") or {}).get("podIP") or "",
    },
    "resourceslices": {
        "spec.nodeName": lambda o: (o.get("spec") or {}).get("nodeName") or "",
        "spec.driver": lambda o: (o.get("spec") or {}).get("driver") or "",
    },
    "nodes": {
        "spec.unschedulable": lambda o: str(
            bool((o.get("spec") or {}).get("unschedulable"))
        ).lower()
    },
    "namespaces": {"status.phase": lambda o: (o.get("status") or {}).get("phase") or ""},
}
_COMMON = {
    "metadata.name": lambda o: o["metadata"].get("name") or "",
    "metadata.namespace": lambda o: o["metadata"].get("namespace") or "",
}

_SET_TERM = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")
_OP_TERM = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|!=|=)\s*([A-Za-z0-9_.-]*)\s*$")


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return [t for t in terms if t.strip()]


def _label_term(term: str) -> Predicate:
    op = _OP_TERM.match(term)
    if op:
        key, operator, value = op.groups()
        if operator == "!=":
            return lambda o: ((o["metadata"].get("labels") or {}).get(key)) != value
        return lambda o: ((o["metadata"].get("labels") or {}).get(key)) == value
    match = _SET_TERM.match(term)
    if not match:
        raise bad_request(f"unable to parse requirement: {term!r}")
    negate, key, operator, values = match.groups()
    if operator is None:
        if negate:
            return lambda o: key not in (o["metadata"].get("labels") or {})
        return lambda o: key in (o["metadata"].get("labels") or {})
    if negate:
        raise bad_request(f"unable to parse requirement: {term!r}")
    allowed = {v.strip() for v in values.split(",") if v.strip()}
    if operator == "in":
        return lambda o: (o["metadata"].get("labels") or {}).get(key) in allowed
    return lambda o: (o["metadata"].get("labels") or {}).get(key) not in allowed


def parse_labels(text: str | None) -> Predicate | None:
    """A predicate for a labelSelector, or None when it selects everything."""
    if not text or not text.strip():
        return None
    terms = [_label_term(t) for t in _split_terms(text)]
    return lambda o: all(t(o) for t in terms)


def parse_fields(text: str | None, plural: str) -> Predicate | None:
    """A predicate for a fieldSelector on `plural`, or None when it selects everything."""
    if not text or not text.strip():
        return None
    known = {**_COMMON, **FIELDS.get(plural, {})}
    terms: list[Predicate] = []
    for term in _split_terms(text):
        op = _OP_TERM.match(term)
        if not op:
            raise bad_request(f"invalid field selector: {term!r}")
        field, operator, value = op.groups()
        getter = known.get(field)
        if getter is None:
            raise bad_request(f'field label not supported: "{field}"')
        terms.append(_field_term(getter, value, negate=operator == "!="))
    return lambda o: all(t(o) for t in terms)


def _field_term(getter: Callable[[dict], str], value: str, *, negate: bool) -> Predicate:
    if negate:
        return lambda o: getter(o) != value
    return lambda o: getter(o) == value


def combine(*predicates: Predicate | None) -> Predicate | None:
    active = [p for p in predicates if p is not None]
    if not active:
        return None
    if len(active) == 1:
        return active[0]
    return lambda o: all(p(o) for p in active)
