"""Slack: `not-busy` lists what the question answers; who-holds adds how busy the device
was over the last hour — or says it is unknown, never 0 %."""

from __future__ import annotations

import orjson

from dra_mirror.service.questions.asker import Asker
from dra_mirror.service.questions.local import LocalQuestions
from dra_mirror.service.slack.commands import answer


def text_of(reply: dict) -> str:
    return orjson.dumps(reply["blocks"]).decode()


async def test_not_busy_lists_the_notebook_and_whom(demo) -> None:
    reply = await answer(LocalQuestions(demo.asker()), "not-busy east", now=demo.now)
    body = text_of(reply)
    assert "*2 held, not busy* in east (below 5 % for 30m)" in body
    assert "research/notebook-" in body and "busy 0 %" in body and "pods notebook-" in body


def held(demo, cluster: str, test) -> str:
    """`pool/device` of the first device a claim matching `test` holds."""
    for claim in demo.world.stores[cluster].iter_objects("resourceclaims"):
        allocation = (claim.get("status") or {}).get("allocation")
        if allocation and test(claim):
            result = allocation["devices"]["results"][0]
            return f"{result['pool']}/{result['device']}"
    raise AssertionError("no such claim")


async def test_who_holds_says_how_busy(demo) -> None:
    questions = LocalQuestions(demo.asker())
    trainer = held(demo, "east", lambda c: c["metadata"]["name"].startswith("trainer-"))
    body = text_of(await answer(questions, f"who-holds {trainer} east", now=demo.now))
    assert "busy 92 % (last 1 h)" in body
    # a MIG device on the node without an exporter
    mig = held(demo, "west", lambda c: c["metadata"]["name"].startswith("mig-inference-"))
    body = text_of(await answer(questions, f"who-holds {mig} west", now=demo.now))
    assert "Who holds" in body and "busy: unknown" in body and "busy 0" not in body


async def test_who_holds_without_a_source_is_unchanged(demo) -> None:
    asker = Asker.over(demo.store, now=lambda: demo.now)
    trainer = held(demo, "east", lambda c: c["metadata"]["name"].startswith("trainer-"))
    body = text_of(await answer(LocalQuestions(asker), f"who-holds {trainer} east"))
    assert "Who holds" in body and "busy" not in body
