"""Manifests from clients are read with bounds: nesting depth and values with aliases expanded
are refused with a clear message, never a RecursionError or an exponential walk."""

from __future__ import annotations

import pytest

from dra_mirror.service.diagnostics.manifests import (
    MAX_DEPTH,
    ManifestTextError,
    check_bounds,
    load_manifests,
)

FLOW_5000 = "kind: Pod\nspec: " + "[" * 5000 + "]" * 5000
BLOCK_5000 = "kind: Pod\nspec:\n" + "".join("  " * i + "b:\n" for i in range(1, 5000))
# nine anchors, each a list of nine aliases of the previous one: 9**9 values once expanded
LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
)


@pytest.mark.parametrize("text", [FLOW_5000, BLOCK_5000], ids=["flow", "block"])
def test_deep_nesting_is_refused(text: str) -> None:
    with pytest.raises(ManifestTextError) as raised:
        load_manifests(text)
    message = str(raised.value)
    assert "nested deeper" in message or "nesting depth" in message
    assert len(message) < 400


def test_nesting_up_to_the_bound_is_read() -> None:
    depth = MAX_DEPTH - 1  # the document mapping is level 1
    (doc,) = load_manifests("spec: " + "[" * depth + "]" * depth)
    check_bounds([doc])
    with pytest.raises(ManifestTextError):
        check_bounds([{"spec": doc}, {}])


def test_exponential_aliases_are_refused_without_walking_them() -> None:
    with pytest.raises(ManifestTextError, match="aliases expanded"):
        load_manifests(LAUGHS)


def test_a_few_aliases_are_fine() -> None:
    docs = load_manifests("x: &labels {app: a}\nkind: Pod\nmetadata: {labels: *labels}\n---\n")
    assert docs == [{"x": {"app": "a"}, "kind": "Pod", "metadata": {"labels": {"app": "a"}}}]


def test_text_that_is_not_yaml_says_so_briefly() -> None:
    with pytest.raises(ManifestTextError) as raised:
        load_manifests("kind: Pod\n  spec: [")
    assert str(raised.value).startswith("not YAML: ") and "\n" not in str(raised.value)
