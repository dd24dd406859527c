"""Request bodies of writes: decoding by content type, and the PATCH flavours.

kube-apiserver accepts four patch types; the simulator treats them as follows:

* `application/merge-patch+json` — RFC 7386 JSON merge patch.
* `application/strategic-merge-patch+json` — applied as a merge patch. For the fields
  kubectl touches on the simulated kinds (labels, annotations, finalizers, whole lists)
  the result is the same; list-merge-by-key is not emulated.
* `application/json-patch+json` — RFC 6902 (`add`, `remove`, `replace`, `test`, `copy`,
  `move`).
* `application/apply-patch+yaml` — server-side apply: creates the object when absent,
  otherwise merges the applied configuration into it (field ownership is not tracked).
"""

from __future__ import annotations

import copy
from typing import Any

import orjson
import yaml

from dra_mirror.service.sim.errors import ApiError, bad_request

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"
PATCH_TYPES = (MERGE, STRATEGIC, JSON_PATCH, APPLY)


def decode_body(body: bytes, content_type: str) -> Any:
    """A request body as JSON values (JSON, or YAML for apply patches and yaml bodies)."""
    media = content_type.split(";", 1)[0].strip().lower()
    if "protobuf" in media or "cbor" in media:
        # kube-apiserver also speaks protobuf/CBOR; the simulator speaks JSON and YAML only.
        raise ApiError(
            415,
            "UnsupportedMediaType",
            f"the body of the request was in an unknown format - accepted media types include: "
            f"application/json, application/yaml (not {media})",
        )
    try:
        if media.endswith("yaml"):
            return yaml.safe_load(body.decode())
        return orjson.loads(body)
    except (orjson.JSONDecodeError, yaml.YAMLError, UnicodeDecodeError) as error:
        raise bad_request(f"the body of the request could not be decoded: {error}") from error


def patch_type(content_type: str) -> str:
    media = content_type.split(";", 1)[0].strip().lower()
    if media not in PATCH_TYPES:
        raise ApiError(
            415,
            "UnsupportedMediaType",
            f"the body of the request was in an unknown format - accepted media types include: "
            f"{', '.join(PATCH_TYPES)}",
        )
    return media


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> tuple[Any, str]:
    node = doc
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node, parts[-1]


def json_patch(doc: Any, operations: Any) -> Any:
    """RFC 6902 applied to a copy of `doc`."""
    if not isinstance(operations, list):
        raise bad_request("a JSON patch must be a list of operations")
    doc = copy.deepcopy(doc)
    try:
        for op in operations:
            kind, parts = op["op"], _pointer(op["path"])
            if kind in ("copy", "move"):
                src_parent, src_key = _parent(doc, _pointer(op["from"]))
                value = copy.deepcopy(
                    src_parent[int(src_key)]
                    if isinstance(src_parent, list)
                    else src_parent[src_key]
                )
                if kind == "move":
                    del src_parent[int(src_key) if isinstance(src_parent, list) else src_key]
                kind, op = "add", {"value": value}
            if not parts:
                if kind in ("add", "replace"):
                    doc = copy.deepcopy(op["value"])
                continue
            parent, key = _parent(doc, parts)
            if kind == "test":
                current = parent[int(key)] if isinstance(parent, list) else parent[key]
                if current != op["value"]:
                    raise bad_request(f"test operation failed at {op['path']}")
            elif kind == "remove":
                del parent[int(key) if isinstance(parent, list) else key]
            elif kind == "add" and isinstance(parent, list):
                parent.insert(len(parent) if key == "-" else int(key), copy.deepcopy(op["value"]))
            elif kind in ("add", "replace"):
                if kind == "replace" and not isinstance(parent, list) and key not in parent:
                    raise bad_request(f"replace of a missing path {op['path']}")
                parent[int(key) if isinstance(parent, list) else key] = copy.deepcopy(op["value"])
            else:
                raise bad_request(f"unknown JSON patch operation {kind!r}")
    except (KeyError, IndexError, ValueError, TypeError) as error:
        raise ApiError(422, "Invalid", f"the JSON patch could not be applied: {error}") from error
    return doc
