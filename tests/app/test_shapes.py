"""Shape verdicts of repeated queries: walked once per document and page sizes, the same
verdict as a fresh walk."""

from __future__ import annotations

from graphql import parse

from dra_mirror.schema import build_schema
from dra_mirror.schema.guard.limits import shape_refusal
from dra_mirror.service.http.shapes import ShapeVerdicts, page_variables
from dra_mirror.service.settings import Settings

PAGED = """query($cluster: String!, $n: Int) {
  devices(cluster: $cluster, first: $n) { edges { node { name } } } }"""


def test_a_document_is_walked_once_per_page_size():
    settings = Settings().graphql
    schema = build_schema(settings)._schema
    walks: list[object] = []

    def counted(*args):
        walks.append(args[3])
        return shape_refusal(*args)

    verdicts = ShapeVerdicts(schema, settings, judge=counted)
    document = parse(PAGED)
    assert page_variables(document) == ("n",)
    for cluster in ("east", "west", "east"):
        assert verdicts.refusal(PAGED, document, None, {"cluster": cluster, "n": 10}) is None
    assert len(walks) == 1  # the cluster is not a page size: one walk
    assert verdicts.refusal(PAGED, document, None, {"cluster": "east", "n": 20}) is None
    assert verdicts.refusal(PAGED, document, None, {"cluster": "east", "n": [1]}) is None
    assert verdicts.refusal(PAGED, document, None, {"cluster": "east", "n": [1]}) is None
    assert len(walks) == 4  # a new page size, and an unhashable one each time


def test_a_refusal_is_remembered_as_the_guard_gives_it():
    settings = Settings().graphql
    schema = build_schema(settings)._schema
    deep = "{ " + "clusters { " * 1 + "name" + " }" * 1 + " }"
    nested = (
        "query { a: clusters { name } "
        + " ".join(f"a{i}: clusters {{ name }}" for i in range(settings.max_aliases + 1))
        + " }"
    )
    verdicts = ShapeVerdicts(schema, settings, judge=shape_refusal, max_entries=2)
    for text in (deep, nested, nested, deep):
        document = parse(text)
        fresh = shape_refusal(schema, document, None, None, settings)
        kept = verdicts.refusal(text, document, None, None)
        assert (fresh is None) == (kept is None)
        if fresh is not None:
            assert kept is not None and kept.message == fresh.message
    assert verdicts.refusal(nested, parse(nested), None, None) is not None
