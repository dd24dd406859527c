"""`fragmentation` through the graph and the command line (the installed `dra-mirror`, over
HTTP), on random H200 MIG layouts, against the brute-force recount of the raw objects; the
process's own questions (Slack, `/mcp`) give the same rows."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.questions.asker import Asker
from dra_mirror.service.questions.local import LocalQuestions
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.protocols import ClusterStatus
from tests.cli_client.test_cli_client import cli, parse_table
from tests.diagnostics.test_fragmentation import CLUSTER, recount, world
from tests.feeding import feed
from tests.slack.conftest import served

KINDS = (("DeviceClass", "deviceclasses"), ("ResourceSlice", "resourceslices"),
         ("ResourceClaim", "resourceclaims"))  # fmt: skip
RAW = world(0)


@pytest.fixture(scope="module")
async def mirror() -> AsyncIterator[tuple[str, MemoryStore]]:
    store = MemoryStore()
    upserts = [normalize(kind, o, cluster=CLUSTER) for kind, plural in KINDS for o in RAW[plural]]
    at = "2026-11-30T00:00:00Z"
    await feed(store, CLUSTER, upserts=upserts, at=at)
    await store.set_status(ClusterStatus(name=CLUSTER, connected=True, synced=True,
                                         api_version="v1", last_event_at=at))  # fmt: skip
    async with served(compose_app(Settings(), store=store)) as url:
        yield url, store


def check(rows: list[dict[str, Any]]) -> None:
    truth = recount(RAW)
    assert {(r["node"], r["className"]) for r in rows} == set(truth)
    for row in rows:
        want = truth[(row["node"], row["className"])]
        assert row["strandedMemory"] == want["stranded"]
        assert row["freeMemory"] == want["free"]
        assert row["gpusPlaceable"] == want["can"]
        assert row["largestPlaceable"] == want["largest"]
        assert set(row["unplaceable"]) == want["unplaceable"]


async def test_the_graph_and_the_command_line_say_the_recount(mirror) -> None:
    url, store = mirror
    code, out, err = await cli("fragmentation", "--server", url, "--json")
    assert code == 0, err
    answer = orjson.loads(out)
    check([{_camel(k): v for k, v in r.items()} for r in answer])
    local = await LocalQuestions(Asker.over(store)).fragmentation()
    assert orjson.loads(orjson.dumps(local)) == answer
    code, out, err = await cli("fragmentation", "--server", url, "--class", "mig.nvidia.com")
    assert code == 0, err
    lines, mig = out.splitlines(), _mig()
    rows = parse_table("\n".join(lines[: 1 + len(mig)]))
    assert [(r["NODE"], r["LARGEST-PLACEABLE"]) for r in rows] == [
        (node, want["largest"] or "-") for node, want in mig
    ]
    assert [line.split(": ")[0] for line in lines[1 + len(mig) :]] == [
        f"{node} mig.nvidia.com" for node, _ in mig
    ]


async def test_an_unknown_class_is_refused(mirror) -> None:
    url, _ = mirror
    code, _out, err = await cli("fragmentation", "--server", url, "--class", "nope")
    assert code == 1 and "no DeviceClass nope" in err


def _mig() -> list[tuple[str, dict[str, Any]]]:
    return sorted((node, w) for (node, c), w in recount(RAW).items() if c == "mig.nvidia.com")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)
