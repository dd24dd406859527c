"""`explain` through the real app: the diagnosis the graph's `explainClaim` gives, found across
clusters, as a Slack message; a claim that is nowhere and a cluster that is not mirrored are
said as such."""

from __future__ import annotations

from dra_mirror.service.slack.blocks import escape

from .test_commands import texts


async def test_explain_through_the_app(slack):
    reply = await slack.command("explain team-b/job-1-gpu-fghij")
    query = """{ explainClaim(cluster: "east", namespace: "team-b", name: "job-1-gpu-fghij")
                 { verdict message requests { verdict } } }"""
    direct = (await slack.http.post("/graphql", json={"query": query})).json()["data"]
    verdict, message = direct["explainClaim"]["verdict"], direct["explainClaim"]["message"]
    body = "\n".join(texts(reply))
    assert f"*team-b/job-1-gpu-fghij* in east: `{verdict}`\n" in body
    assert message and escape(message) in reply["blocks"][0]["text"]["text"]
    for i, request in enumerate(direct["explainClaim"]["requests"]):
        assert f"• requests[{i}].verdict: {request['verdict']}" in body
    named = await slack.command("explain east/team-b/job-1-gpu-fghij")
    assert named["blocks"] == reply["blocks"]


async def test_explain_of_nothing_and_of_an_unknown_cluster(slack):
    missing = await slack.command("explain team-a/gone")
    assert missing["text"] == "No claim `team-a/gone` in any cluster you may see."
    south = await slack.command("explain team-b/job-1-gpu-fghij south")
    assert south["text"].startswith("no cluster named 'south' (clusters: east, west)")
    for words in ("explain", "explain job", "explain a/b/c/d"):
        assert "namespace/claim" in (await slack.command(words))["text"]
