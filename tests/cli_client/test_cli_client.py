"""`dra-mirror who-holds|free|waiting|idle` run as subprocesses (the installed console
script) against the real app served by uvicorn on loopback, answers checked against the
world's truth; the same documents the Slack commands use, so both agree."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest

from dra_mirror.schema.reader import Scope
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.memory import MemoryStore
from tests.slack import truth
from tests.slack.conftest import QUERIED_AT, load_world, served

DRA_MIRROR = Path(sys.executable).with_name("dra-mirror")


class Mirror:
    def __init__(self) -> None:
        self.url = ""
        self.authorizations: list[str | None] = []

    def scope_for(self, request) -> Scope:
        self.authorizations.append(request.headers.get("authorization"))
        return Scope.everything()


@pytest.fixture(scope="module")
async def mirror() -> AsyncIterator[Mirror]:
    store = MemoryStore()
    await load_world(store)
    mirror = Mirror()
    app = compose_app(Settings(), store=store, scope_for=mirror.scope_for, now=lambda: QUERIED_AT)
    async with served(app) as url:
        mirror.url = url
        yield mirror


async def cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("DRA_MIRROR_")}
    process = await asyncio.create_subprocess_exec(
        str(DRA_MIRROR),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**environ, **(env or {})},
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def parse_table(text: str) -> list[dict[str, str]]:
    """Rows of a padded table, cells cut at the header's column starts."""
    header, *lines = text.splitlines()
    starts = [i for i, ch in enumerate(header) if ch != " " and (i == 0 or header[i - 1] == " ")]
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    names = [header[a:b].strip() for a, b in bounds]
    return [dict(zip(names, (line[a:b].strip() for a, b in bounds), strict=True)) for line in lines]


async def json_of(mirror: Mirror, *args: str) -> dict:
    code, out, err = await cli(*args, "--server", mirror.url, "--json")
    assert code == 0, err
    return orjson.loads(out)


async def test_who_holds(mirror):
    one, ambiguous = await asyncio.gather(
        json_of(mirror, "who-holds", "GPU-00000000-0000-0000-0000-00000000000b"),
        json_of(mirror, "who-holds", "gpu-0"),
    )
    expected = truth.holders_of([("east", "gpu.nvidia.com", "n1", "gpu-1")])
    assert [(h["cluster"], h["node"], h["claim"]) for h in one["holdings"]] == expected
    (holding,) = one["holdings"]
    assert holding["model"] == "NVIDIA H200" and holding["origin"] == "MANUAL"
    assert holding["pods"] == [f"team-a/web-{i} (Running)" for i in range(3)]
    assert one["ambiguous"] is False and ambiguous["ambiguous"] is True
    found = sorted((h["cluster"], h["node"], h["claim"]) for h in ambiguous["holdings"])
    assert found == truth.holders_of(truth.named("gpu-0"))


async def test_who_holds_table_and_token(mirror):
    code, out, err = await cli(
        "who-holds", "gpu-0", "--server", mirror.url, env={"DRA_MIRROR_TOKEN": "s3cret"}
    )
    assert code == 0, err
    assert err == "gpu-0 names 2 held devices:\n"
    rows = parse_table(out)
    assert list(rows[0]) == [
        *("CLUSTER", "NODE", "DEVICE", "UUID", "MODEL", "CLAIM", "ORIGIN", "STATE", "PODS"),
        *("SINCE", "IDLE-SINCE"),
    ]
    assert sorted((r["CLUSTER"], r["NODE"], r["CLAIM"]) for r in rows) == truth.holders_of(
        truth.named("gpu-0")
    )
    assert {r["MODEL"] for r in rows} == {"NVIDIA H200"}
    assert "team-c/idle-claim" in out and "2026-01-01T02:00:00Z" in out  # idle since
    assert "Bearer s3cret" in mirror.authorizations
    code, out, err = await cli("who-holds", "nope", "--server", mirror.url)
    assert (code, out) == (1, "") and "nope matches no device in any mirrored cluster" in err
    ((_, node, device),) = truth.free_devices()
    code, out, _ = await cli("who-holds", f"{node}/{device}", "--server", mirror.url)
    assert (code, out) == (0, f"no claim holds {node}/{device}: it is free\n")


async def test_free_waiting_idle(mirror):
    free, waiting, idle = await asyncio.gather(
        json_of(mirror, "free"),
        json_of(mirror, "waiting", "gpu.nvidia.com"),
        json_of(mirror, "idle"),
    )
    assert sorted((d["cluster"], d["node"], d["device"]) for d in free["devices"]) == (
        truth.free_devices()
    )
    assert free["total"] == len(truth.free_devices())
    code, out, err = await cli(
        "free", "mig.nvidia.com", "--cluster", "west", "--server", mirror.url
    )
    assert (code, out) == (1, "")
    assert "no DeviceClass mig.nvidia.com in cluster west; there are: gpu.nvidia.com" in err
    pending = [(c, claim) for c, claim, cls in truth.pending_claims() if cls == "gpu.nvidia.com"]
    assert [(c["cluster"], c["claim"]) for c in waiting["claims"]] == pending
    assert waiting["claims"][0]["pending_seconds"] == 3 * 3600  # the server's clock
    assert sorted((c["cluster"], c["claim"]) for c in idle["claims"]) == truth.idle_claims()
    assert idle["claims"][0]["waiting_for_class"] == len(pending)


async def test_tables(mirror):
    (_, free, _), (_, waiting, _), (_, idle, _) = await asyncio.gather(
        cli("free", "--server", mirror.url),
        cli("waiting", "--server", mirror.url),
        cli("idle", "--server", mirror.url),
    )
    assert free.splitlines()[:2] == [
        f"{len(truth.free_devices())} free",
        "CLUSTER  NODE  DEVICE        UUID                                      MODEL",
    ]
    ((cluster, node, device),) = truth.free_devices()
    assert free.splitlines()[2].split()[:3] == [cluster, node, device]
    assert waiting.splitlines()[2].split() == [
        *truth.pending_claims()[0][:2],
        "template",
        "gpu.nvidia.com",
        "3h",
        "0m",
    ]
    assert idle.splitlines()[2].split()[:4] == [*truth.idle_claims()[0], "manual", "n2"]


async def test_errors(mirror):
    code, out, err = await cli("who-holds", "gpu-0", "--server", "http://127.0.0.1:9")
    assert code == 1 and out == "" and err.startswith("Error: cannot reach http://127.0.0.1:9")
    code, _, err = await cli("who-holds", "--server", mirror.url)
    assert code == 2 and "Missing argument 'DEVICE'" in err


EXAMPLE = str(Path(__file__).parents[2] / "examples" / "shared-claim.yaml")
# every command taking --cluster, as a user types it with a typo in the cluster's name
WITH_CLUSTER = (
    ("free",),
    ("free", "gpu.nvidia.com"),
    ("waiting",),
    ("idle",),
    ("capacity",),
    ("who-holds", "gpu-0"),
    ("pod-devices", "team-a/web-0"),
    ("explain", "team-a/shared"),
    ("lint",),
    ("lint", EXAMPLE),
    ("plan", EXAMPLE),
)


async def test_an_unknown_cluster_is_a_usage_error(mirror):
    """A mistyped --cluster: exit 2, the known clusters listed, the nearest one offered —
    never an empty answer with exit 0."""
    answers = await asyncio.gather(
        *(cli(*args, "--cluster", "eats", "--server", mirror.url) for args in WITH_CLUSTER)
    )
    for args, (code, out, err) in zip(WITH_CLUSTER, answers, strict=True):
        assert (code, out) == (2, ""), (args, code, out, err)
        assert "no cluster named 'eats' (clusters: east, west); did you mean 'east'?" in err, (
            args, err,
        )  # fmt: skip


@pytest.fixture(scope="module")
async def syncing() -> AsyncIterator[tuple[str, MemoryStore]]:
    """The world with `west` still listing (its status not synced)."""
    from dra_mirror.service.stores.protocols import ClusterStatus

    store = MemoryStore()
    await load_world(store)
    await store.set_status(ClusterStatus(name="west", connected=True, synced=False))
    app = compose_app(Settings(), store=store, now=lambda: QUERIED_AT)
    async with served(app) as url:
        yield url, store


async def test_a_cluster_not_synced_yet_says_so(syncing):
    """Asked about a cluster still listing: exit 1 and "not synced yet", not "0 free"; asked
    about every cluster: the synced ones, and the others named on stderr."""
    from dra_mirror.service.stores.protocols import ClusterStatus

    url, store = syncing
    for args in (("free",), ("waiting",), ("idle",), ("capacity",), ("lint",)):
        code, out, err = await cli(*args, "--cluster", "west", "--server", url)
        assert (code, out) == (1, ""), (args, code, out, err)
        assert err.startswith("Error: not synced yet: west"), (args, err)
    code, out, err = await cli("free", "--server", url, "--json")
    assert code == 0, err
    assert {d["cluster"] for d in orjson.loads(out)["devices"]} == {"east"}
    assert err == "warning: not synced yet, left out: west\n"
    await store.set_status(ClusterStatus(name="east", connected=True, synced=False))
    try:
        code, out, err = await cli("free", "--server", url)
        assert (code, out) == (1, "") and err.startswith("Error: not synced yet: east, west")
    finally:
        await store.set_status(ClusterStatus(name="east", connected=True, synced=True))
