"""`explain`: the document is built from the graph's own shape (introspection), the claim found
across clusters; through the real app it answers, or says the diagnostics are not there."""

from __future__ import annotations

import pytest

from dra_mirror import schema as graph
from dra_mirror.service.questions.chatops import QuestionError
from dra_mirror.service.questions.explain import ExplainUnavailable, ask_explain
from dra_mirror.service.slack.blocks import escape
from dra_mirror.service.slack.commands import answer
from dra_mirror.service.slack.endpoint import in_process

from .explain_schema import SCHEMA
from .test_commands import texts


async def test_explain_reads_the_shape_and_finds_the_cluster():
    ask = in_process(SCHEMA, None)
    (found,) = await ask_explain(ask, ["team-a/job"])
    assert found.cluster == "west" and found.claim == "team-a/job"
    assert found.diagnosis == {
        "__typename": "Diagnosis",
        "verdict": "all-held",
        "message": "every matching device is held; 1 holder is idle",
        "requests": [{"request": "gpu", "verdict": "all-held", "matching": 2}],
    }
    assert await ask_explain(ask, ["west/team-a/job"]) == [found]
    assert await ask_explain(ask, ["team-a/job", "east"]) == []
    assert await ask_explain(ask, ["team-a/gone"]) == []
    for words in ([], ["job"], ["a/b/c/d"], ["team-a/job", "south"]):
        with pytest.raises(QuestionError):
            await ask_explain(ask, words)


async def test_explain_as_a_slack_message():
    reply = await answer(in_process(SCHEMA, None), "explain team-a/job")
    body = "\n".join(texts(reply))
    assert "*team-a/job* in west: `all-held`" in body
    assert "every matching device is held; 1 holder is idle" in body
    assert "• requests[0].verdict: all-held" in body and "• requests[0].matching: 2" in body
    missing = await answer(in_process(SCHEMA, None), "explain team-a/gone")
    assert missing["text"] == "No claim `team-a/gone` in any mirrored cluster."


async def test_explain_through_the_app(slack):
    reply = await slack.command("explain team-b/job-1-gpu-fghij")
    if "explainClaim" in graph.print_sdl():
        query = """{ explainClaim(cluster: "east", namespace: "team-b", name: "job-1-gpu-fghij")
                     { verdict message } }"""
        direct = (await slack.http.post("/graphql", json={"query": query})).json()["data"]
        verdict, message = direct["explainClaim"]["verdict"], direct["explainClaim"]["message"]
        body = "\n".join(texts(reply))
        assert f"*team-b/job-1-gpu-fghij* in east: `{verdict}`\n" in body
        assert message and escape(message) in reply["blocks"][0]["text"]["text"]
    else:
        assert reply["text"] == "this server has no explainClaim (diagnostics not installed)"
        with pytest.raises(ExplainUnavailable):
            await ask_explain(in_process(graph.build_schema(), None), ["team-b/x"])
