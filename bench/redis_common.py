"""Shared parts of the Redis benchmarks: a private redis-server on loopback, the scenario's
records, and percentiles. Not a benchmark itself."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dra_mirror.service.model.kinds import BY_KIND, KINDS
from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.model.records import Record

PLURALS = {kind: BY_KIND[kind].plural for kind in KINDS}
# The order in which the reactor's list calls typically complete (small kinds first).
LIST_ORDER = (
    "PodGroup",
    "ResourcePoolStatusRequest",
    "DeviceTaintRule",
    "DeviceClass",
    "ResourceClaimTemplate",
    "Node",
    "ResourceSlice",
    "ResourceClaim",
    "Pod",
)
assert set(LIST_ORDER) == set(KINDS)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def redis_server() -> Iterator[str]:
    """A fresh redis-server (no persistence) on 127.0.0.1; yields its URL."""
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    port = free_port()
    with tempfile.TemporaryDirectory() as workdir:
        process = subprocess.Popen(
            [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "",
             "--appendonly", "no", "--dir", workdir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            for _ in range(200):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                    break
                except OSError:
                    time.sleep(0.02)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()
            process.wait()


def scenario_records(name: str) -> tuple[str, dict[str, list[Record]]]:
    """(cluster, kind -> records) of a shipped scenario's single cluster, normalized."""
    from dra_mirror.service.sim.scenario import build_world, load_scenario

    world = build_world(load_scenario(name))
    [(cluster, store)] = world.stores.items()
    records = {
        kind: [normalize(kind, raw, cluster=cluster) for raw in store.iter_objects(plural)]
        for kind, plural in PLURALS.items()
    }
    return cluster, records


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def repo_root() -> Path:
    return Path(__file__).resolve().parents[1]
