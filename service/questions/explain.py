"""`explain <namespace/claim>`: the graph's `explainClaim`, asked in one of two ways.

* `explain_claim` (the command line, which renders the fields it knows) sends a fixed document:
  `DIAGNOSIS_FIELDS` of the claim in one cluster, or — no cluster given — one aliased field per
  mirrored cluster, so a claim name is looked up everywhere in one request.
* `ask_explain` (chat, which lists every leaf of the answer) builds the document from the
  schema itself (introspection): the arguments `explainClaim` takes (`cluster`, `namespace`,
  `name`/`claim`) are filled in, and every leaf field of its result is selected, two levels
  deep (objects, lists of objects, and the members of a union). The claim is found first:
  `namespace/claim` is looked up in every cluster (`cluster/namespace/claim` or a cluster word
  names one); several clusters holding the same name give one explanation each.

Promises: a server without `explainClaim` gives `ExplainUnavailable`, not an error from the
graph; an unknown claim gives an empty list of explanations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from .asking import Ask, QuestionError

__all__ = [
    "DIAGNOSIS_FIELDS",
    "ExplainUnavailable",
    "Explanation",
    "ask_explain",
    "explain_claim",
    "explain_document",
    "split_target",
]

SHAPE = """query Shape($name: String!) { __type(name: $name) {
  kind name possibleTypes { name }
  fields { name args { name type { ...T } } type { ...T } } } }
fragment T on __Type { kind name ofType { kind name ofType { kind name ofType { kind name } } } }"""

LEAF_KINDS = ("SCALAR", "ENUM")
# Whole objects of the core graph: a diagnosis naming them already says what matters, and
# expanding them would repeat the claim or pod field by field.
CORE_OBJECTS = frozenset(
    {"ResourceClaim", "Pod", "Device", "Node", "ResourceSlice", "DeviceClass"}
    | {"ResourceClaimTemplate", "Cluster"}
)
DEPTH = 3  # the root's result, its objects, and theirs

# What the command line renders of a diagnosis (`service.cli.diagnostics.render_diagnosis`).
DIAGNOSIS_FIELDS = """cluster namespace name state verdict message holdersTotal holdersHidden
  nodesWithoutDriver
  pods { namespace name }
  requests { request deviceClassName classExists classDevices freeOrShareable nodes needed
             verdict summary selectors { expression passing rejected }
             selectorErrors { expression message } heldBy { namespace name } }
  holders { claim { namespace name } pods { namespace name } running idle idleSince }
  checks { name ok detail }"""


class ExplainUnavailable(QuestionError):
    """The server's graph has no `explainClaim` (the diagnostics are not in this build)."""


@dataclass
class Explanation:
    cluster: str
    claim: str  # namespace/name
    diagnosis: dict[str, Any]  # explainClaim's answer as the graph gave it


def _named(type_ref: dict[str, Any]) -> dict[str, Any]:
    while type_ref.get("ofType"):
        type_ref = type_ref["ofType"]
    return type_ref


def _printed(type_ref: dict[str, Any]) -> str:
    kind = type_ref["kind"]
    if kind == "NON_NULL":
        return _printed(type_ref["ofType"]) + "!"
    if kind == "LIST":
        return f"[{_printed(type_ref['ofType'])}]"
    return str(type_ref["name"])


class ShapeReader:
    """Builds selections from introspection, one query per type, remembered."""

    def __init__(self, ask: Ask) -> None:
        self.ask = ask
        self.types: dict[str, dict[str, Any] | None] = {}

    async def type(self, name: str) -> dict[str, Any] | None:
        if name not in self.types:
            self.types[name] = (await self.ask(SHAPE, {"name": name}))["__type"]
        return self.types[name]

    async def selection(self, name: str, depth: int) -> str:
        shape = await self.type(name)
        if shape is None or depth <= 0:
            return ""
        if shape["kind"] == "UNION":
            parts = ["__typename"]
            for member in shape["possibleTypes"]:
                inner = await self.selection(member["name"], depth)
                if inner:
                    parts.append(f"... on {member['name']} {{ {inner} }}")
            return " ".join(parts)
        parts = []
        for f in shape.get("fields") or []:
            if any(a["type"]["kind"] == "NON_NULL" for a in f["args"]):
                continue  # needs an argument we cannot guess
            target = _named(f["type"])
            if target["kind"] in LEAF_KINDS:
                parts.append(f["name"])
            elif depth > 1 and target["name"] not in CORE_OBJECTS:
                inner = await self.selection(target["name"], depth - 1)
                if inner:
                    parts.append(f"{f['name']} {{ {inner} }}")
        return " ".join(parts)


def split_target(words: list[str], clusters: list[str]) -> tuple[str | None, str, str]:
    """(cluster, namespace, name) from `namespace/claim [cluster]` or `cluster/namespace/claim`."""
    if not words:
        raise QuestionError("say which claim: explain <namespace/claim> [cluster]")
    parts = words[0].split("/")
    cluster = words[1] if len(words) > 1 else None
    if len(parts) == 3:
        cluster = parts[0]
        parts = parts[1:]
    if len(parts) != 2 or not all(parts):
        raise QuestionError(f"{words[0]!r}: give the claim as namespace/claim")
    if cluster is not None and cluster not in clusters:
        raise QuestionError(f"no cluster named {cluster!r} (clusters: {', '.join(clusters)})")
    return cluster, parts[0], parts[1]


async def ask_explain(ask: Ask, words: list[str]) -> list[Explanation]:
    query_shape = await ask(SHAPE, {"name": "Query"})
    field = next((f for f in query_shape["__type"]["fields"] if f["name"] == "explainClaim"), None)
    if field is None:
        raise ExplainUnavailable("this server has no explainClaim (diagnostics not installed)")
    clusters = [c["name"] for c in (await ask("{ clusters { name } }", {}))["clusters"]]
    cluster, namespace, name = split_target(words, clusters)
    found = await _clusters_with(ask, [cluster] if cluster else clusters, namespace, name)
    shapes = ShapeReader(ask)
    shapes.types["Query"] = query_shape["__type"]
    values = {"cluster": None, "namespace": namespace, "name": name, "claim": name}
    declared, passed = [], []
    for arg in field["args"]:
        if arg["name"] not in values:
            if arg["type"]["kind"] == "NON_NULL":
                raise ExplainUnavailable(f"explainClaim wants {arg['name']!r}, unknown here")
            continue
        declared.append(f"${arg['name']}: {_printed(arg['type'])}")
        passed.append(arg["name"])
    target = _named(field["type"])
    inner = await shapes.selection(target["name"], DEPTH - 1)
    selection = f" {{ {inner} }}" if target["kind"] not in LEAF_KINDS else ""
    arguments = ", ".join(f"{name}: ${name}" for name in passed)
    document = f"query Explain({', '.join(declared)}) {{ explainClaim({arguments}){selection} }}"
    out = []
    for where in found:
        variables = {k: v for k, v in {**values, "cluster": where}.items() if k in passed}
        diagnosis = (await ask(document, variables))["explainClaim"]
        if diagnosis is not None:
            out.append(Explanation(where, f"{namespace}/{name}", diagnosis))
    return out


async def _clusters_with(ask: Ask, clusters: list[str], namespace: str, name: str) -> list[str]:
    """The clusters (of `clusters`) holding a claim namespace/name, in one document."""
    if not clusters:
        return []
    declared = ["$namespace: String!", "$name: String!"]
    fields = []
    variables: dict[str, Any] = {"namespace": namespace, "name": name}
    for i, cluster in enumerate(clusters):
        declared.append(f"$c{i}: String!")
        variables[f"c{i}"] = cluster
        fields.append(
            f"c{i}: resourceClaim(cluster: $c{i}, namespace: $namespace, name: $name) {{ cluster }}"
        )
    data = await ask(f"query Where({', '.join(declared)}) {{ {' '.join(fields)} }}", variables)
    return [c for i, c in enumerate(clusters) if data[f"c{i}"] is not None]


def explain_document(clusters: list[str] | None) -> str:
    """explainClaim for one cluster (`$cluster`), or one aliased field per named cluster."""
    if clusters is None:
        return (
            "query Explain($cluster: String!, $namespace: String!, $name: String!,"
            " $nodes: [String!]) {"
            " c0: explainClaim(cluster: $cluster, namespace: $namespace, name: $name,"
            f" eligibleNodes: $nodes) {{ {DIAGNOSIS_FIELDS} }} }}"
        )
    fields = [
        f"c{i}: explainClaim(cluster: {orjson.dumps(c).decode()}, namespace: $namespace, "
        f"name: $name, eligibleNodes: $nodes) {{ {DIAGNOSIS_FIELDS} }}"
        for i, c in enumerate(clusters)
    ]
    return (
        "query Explain($namespace: String!, $name: String!, $nodes: [String!]) "
        f"{{ {' '.join(fields)} }}"
    )


async def explain_claim(
    ask: Ask, namespace: str, name: str, cluster: str | None, nodes: list[str] | None = None
) -> list[dict[str, Any]]:
    """The diagnoses (`DIAGNOSIS_FIELDS`) of claim `namespace/name` in `cluster`, or in every
    cluster holding it; `nodes`: the nodes its pods may use, when the caller knows better than
    their nodeSelector and required node affinity."""
    if cluster is not None:
        data = await ask(
            explain_document(None),
            {"cluster": cluster, "namespace": namespace, "name": name, "nodes": nodes},
        )
    else:
        clusters = [c["name"] for c in (await ask("{ clusters { name } }", {}))["clusters"]]
        if not clusters:
            return []
        data = await ask(
            explain_document(clusters), {"namespace": namespace, "name": name, "nodes": nodes}
        )
    return [d for d in data.values() if d is not None]
