"""Scraping helpers for the metrics tests: an app client, the parsed text, and the truth about
DRA objects computed from the simulator's raw objects (never from the mirror's records)."""

from __future__ import annotations

import contextlib
from collections import Counter
from datetime import datetime
from typing import Any

import httpx
from asgi_lifespan import LifespanManager
from prometheus_client.parser import text_string_to_metric_families

Labels = tuple[tuple[str, str], ...]


@contextlib.asynccontextmanager
async def client(app):
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mirror") as http:
            yield http


class Scrape:
    """One `/metrics` answer: families by name (with their type) and samples by name."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.types: dict[str, str] = {}
        self.samples: dict[str, dict[Labels, float]] = {}
        for family in text_string_to_metric_families(text):
            self.types[family.name] = family.type
            for sample in family.samples:
                labels = tuple(sorted(sample.labels.items()))
                self.samples.setdefault(sample.name, {})[labels] = sample.value

    def series(self, name: str, **match: str) -> dict[Labels, float]:
        """Samples of `name` whose labels include `match`."""
        return {
            labels: value
            for labels, value in self.samples.get(name, {}).items()
            if all(dict(labels).get(k) == v for k, v in match.items())
        }

    def value(self, name: str, **labels: str) -> float:
        return self.samples[name][tuple(sorted(labels.items()))]

    def label_sets(self, name: str) -> set[frozenset[str]]:
        return {frozenset(k for k, _ in labels) for labels in self.samples.get(name, {})}


async def scrape(http: httpx.AsyncClient) -> Scrape:
    answer = await http.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    return Scrape(answer.text)


# --- truth from raw objects --------------------------------------------------------------------


def claims(cluster_store) -> list[dict[str, Any]]:
    return cluster_store.list("resourceclaims")


def claim_state(raw: dict[str, Any]) -> str:
    status = raw.get("status") or {}
    if raw["metadata"].get("deletionTimestamp"):
        return "deleting"
    if status.get("reservedFor"):
        return "reserved"
    return "allocated" if status.get("allocation") else "pending"


def slice_devices(cluster_store) -> dict[tuple[str, str, str, str], int]:
    out = {}
    for raw in cluster_store.list("resourceslices"):
        spec = raw["spec"]
        key = (
            raw["metadata"]["name"],
            spec["driver"],
            spec["pool"]["name"],
            spec.get("nodeName") or "",
        )
        out[key] = len(spec.get("devices") or ())
    return out


def slice_info(cluster_store) -> set[tuple[str, str, str, str, str]]:
    """(resourceslice, driver, pool_name, node_name, all_nodes) of every slice."""
    return {
        (raw["metadata"]["name"], raw["spec"]["driver"], raw["spec"]["pool"]["name"],
         raw["spec"].get("nodeName") or "", "true" if raw["spec"].get("allNodes") else "false")
        for raw in cluster_store.list("resourceslices")
    }  # fmt: skip


def reserved_for(cluster_store) -> set[tuple[str, ...]]:
    """(namespace, claim, api group, resource, name, uid) per status.reservedFor entry."""
    return {
        (raw["metadata"]["namespace"], raw["metadata"]["name"], r.get("apiGroup") or "",
         r["resource"], r["name"], r["uid"])
        for raw in claims(cluster_store)
        for r in (raw.get("status") or {}).get("reservedFor") or ()
    }  # fmt: skip


def allocated_devices(cluster_store) -> set[tuple[str, ...]]:
    """(namespace, claim, request, driver, pool, device) per allocation result."""
    return {
        (raw["metadata"]["namespace"], raw["metadata"]["name"], r["request"], r["driver"],
         r["pool"], r["device"])
        for raw in claims(cluster_store)
        for r in (((raw.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or ()
    }  # fmt: skip


def pod_claims(cluster_store) -> set[tuple[str, str, str, str, str, str]]:
    out = set()
    for pod in cluster_store.list("pods"):
        meta = pod["metadata"]
        statuses = {
            s["name"]: s.get("resourceClaimName")
            for s in (pod.get("status") or {}).get("resourceClaimStatuses") or ()
        }
        for entry in pod["spec"].get("resourceClaims") or ():
            claim = entry.get("resourceClaimName") or statuses.get(entry["name"]) or ""
            template = entry.get("resourceClaimTemplateName") or ""
            if claim or template:
                out.add((meta["namespace"], meta["name"], meta["uid"], entry["name"], claim,
                         template))  # fmt: skip
    return out


def held_devices(cluster_store) -> set[tuple[str, str, str]]:
    """(driver, pool, device) of every allocation result."""
    out = set()
    for raw in claims(cluster_store):
        allocation = (raw.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or ():
            out.add((result["driver"], result["pool"], result["device"]))
    return out


def idle_held_devices(cluster_store) -> set[tuple[str, str, str]]:
    """Devices of allocated claims none of whose consumer pods is Running."""
    pods = {
        (p["metadata"]["namespace"], p["metadata"]["name"]): p for p in cluster_store.list("pods")
    }
    out = set()
    for raw in claims(cluster_store):
        status = raw.get("status") or {}
        if not status.get("allocation"):
            continue
        namespace = raw["metadata"]["namespace"]
        running = False
        for consumer in status.get("reservedFor") or ():
            pod = pods.get((namespace, consumer["name"]))
            if pod and pod["metadata"]["uid"] == consumer.get("uid", pod["metadata"]["uid"]):
                running = running or (pod.get("status") or {}).get("phase") == "Running"
        if not running:
            for result in status["allocation"]["devices"]["results"]:
                out.add((result["driver"], result["pool"], result["device"]))
    return out


def pending_ages(cluster_store, now: datetime) -> list[float]:
    return [
        (now - datetime.fromisoformat(raw["metadata"]["creationTimestamp"])).total_seconds()
        for raw in claims(cluster_store)
        if claim_state(raw) == "pending"
    ]


def state_counts(cluster_store) -> Counter[str]:
    return Counter(claim_state(raw) for raw in claims(cluster_store))
