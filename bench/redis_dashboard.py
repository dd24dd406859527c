"""The documents of a dashboard load, as the web screens send them, and a load runner that keeps
errors. Not a benchmark itself (bench/redis_replicas.py --nodes runs it).

Each screen is the list of documents its page sends when it opens (service/web/static/app/
screens: overview.js, claims.js, device.js, the node page of bench/graphql_whoholds.py) plus
the diagnostics a user asks from them (findDevices, explainClaim). Variables are filled from
what Redis holds (a random node, claim, pending claim, held device).
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from bench.graphql_whoholds import NODE_PAGE, WHO_HOLDS, http_request

OVERVIEW = """query Overview {
  clusters { name status { connected synced apiVersion draServed draVersions lastEventAt lastSyncAt
  error malformed } } }"""
TOTALS = """query OverviewTotals($cluster: String!) {
  devices(cluster: $cluster, first: 0) { totalCount }
  claims: resourceClaims(cluster: $cluster, first: 0) { totalCount }
  pending: resourceClaims(cluster: $cluster, state: PENDING, first: 0) { totalCount } }"""
UNAVAILABLE = """query OverviewUnavailable($cluster: String!) {
  unpublished: devices(cluster: $cluster, published: false, first: 0) { totalCount }
  pools: resourcePools(cluster: $cluster) { unavailableDevices } }"""
BY_STATUS = """query DevicesByStatus($cluster: String!, $status: DeviceStatus!) {
  devices(cluster: $cluster, status: $status, first: 0) { totalCount } }"""
IDLE = """query IdleHolderCount($cluster: String!) {
  resourceClaims(cluster: $cluster, idle: true, first: 0) { totalCount } }"""
PENDING_AGES = """query PendingAges($cluster: String!, $after: String) {
  resourceClaims(cluster: $cluster, state: PENDING, first: 1000, after: $after) {
    totalCount pageInfo { hasNextPage endCursor } nodes { pendingSeconds } } }"""
FINDINGS = """query ClusterFindings($cluster: String!) {
  lint(cluster: $cluster) { rule severity object message } }"""
CLAIM_ROW = """fragment ClaimRow on ResourceClaim {
  cluster namespace name uid state origin templateName createdAt pendingSeconds idle idleSince
  requests { name deviceClassName allocationMode count selectors adminAccess capacity
    firstAvailable { name deviceClassName allocationMode count selectors capacity } }
  allocation { nodeName allocatedAt devices { request shareID consumedCapacity adminAccess
    device { cluster driver pool name uuid nodeName } } }
  consumers { cluster namespace name phase nodeName } }"""
CLAIMS = (
    """query Claims($cluster: String, $state: ClaimState, $first: Int, $after: String) {
  resourceClaims(cluster: $cluster, state: $state, first: $first, after: $after) {
    totalCount pageInfo { hasNextPage endCursor } nodes { ...ClaimRow } } }"""
    + CLAIM_ROW
)
DEVICE_FIELDS = """fragment SliceDevice on Device {
  cluster driver pool name uuid nodeName status shareable published attributes consumesCounters
  taints capacity { name value requestPolicy { default validValues validRange { min max step } } }
  remainingCapacity { name value }
  slice { name nodeName allNodes pool { name generation resourceSliceCount complete } }
  allocations { request shareID consumedCapacity claim { cluster namespace name state idle } }
  withheldAllocations }"""
HOLDERS = (
    """query DeviceHolders($cluster: String!, $spec: String!) {
  whoHolds(device: $spec, cluster: $cluster) {
    request shareID consumedCapacity since
    claim { cluster namespace name state idle idleSince origin }
    pods { cluster namespace name phase nodeName }
    device { ...SliceDevice allocations { request shareID health { container health message } } }
  } }"""
    + DEVICE_FIELDS
)
FIND = """query Find($cluster: String!, $selector: String!) {
  findDevices(cluster: $cluster, selector: $selector, status: FREE, first: 50) {
    totalCount nodes { name nodeName } } }"""
EXPLAIN = """query WhyPending($cluster: String!, $namespace: String!, $name: String!) {
  explainClaim(cluster: $cluster, namespace: $namespace, name: $name) { verdict message } }"""
WHO_HOLDS_IN = WHO_HOLDS.replace("$uuid: String!)", "$uuid: String!, $cluster: String)").replace(
    "whoHolds(device: $uuid)", "whoHolds(device: $uuid, cluster: $cluster)"
)
SELECTOR = 'device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA")'
STATUSES = ("FREE", "HELD", "SHARED", "BLOCKED")


@dataclass
class Samples:
    """What the dashboard load picks its variables from."""

    cluster: str
    nodes: list[str]
    claims: list[tuple[str, str]]
    pending: list[tuple[str, str]]
    uuids: list[str]


def counts(cluster: str) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """Each list or count on its own (the lists-and-counts target)."""
    c = {"cluster": cluster}
    return {
        "devices totalCount": [
            ("query($cluster: String!) { devices(cluster: $cluster, first: 0) { totalCount } }",
             c)],
        "devices by status": [(BY_STATUS, {**c, "status": s}) for s in STATUSES],
        "claims pending totalCount": [
            ("query($cluster: String!) { resourceClaims(cluster: $cluster, state: PENDING, "
             "first: 0) { totalCount } }", c)],
        "claims idle totalCount": [(IDLE, c)],
        "claims page (50)": [(CLAIMS, {**c, "first": 50})],
        "Cluster.counts": [
            ("query { clusters { counts { devices freeDevices claims pendingClaims } } }", {})],
    }  # fmt: skip


def screens(samples: Samples, rng: random.Random) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """One opening of each screen (its documents in order), variables drawn from `samples`."""
    c = {"cluster": samples.cluster}
    node = rng.choice(samples.nodes)
    namespace, name = rng.choice(samples.pending or samples.claims)
    return {
        "Overview": [
            (OVERVIEW, {}),
            (TOTALS, c),
            (UNAVAILABLE, c),
            *((BY_STATUS, {**c, "status": s}) for s in STATUSES),
            (IDLE, c),
            (PENDING_AGES, c),
            (FINDINGS, c),
        ],
        "claims list page": [(CLAIMS, {**c, "first": 50})],
        "device page": [(HOLDERS, {**c, "spec": rng.choice(samples.uuids)})],
        "node page": [(NODE_PAGE, {**c, "node": node})],
        "findDevices": [(FIND, {**c, "selector": SELECTOR})],
        "explainClaim": [(EXPLAIN, {**c, "namespace": namespace, "name": name})],
        "whoHolds": [(WHO_HOLDS_IN, {"uuid": rng.choice(samples.uuids), **c})],
    }


@dataclass
class Run:
    timings: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


LIMIT = 120.0  # seconds a document may take before the run fails


async def timed(port: int, requests: list[tuple[str, dict[str, Any]]], run: Run) -> None:
    """Send each request on one keep-alive connection, timing it; a GraphQL error or a
    status other than 200 is kept (its first line) and timed like the rest."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for query, variables in requests:
            payload = http_request(port, query, variables)
            began = time.perf_counter()
            writer.write(payload)
            async with asyncio.timeout(LIMIT):
                status_line = await reader.readline()
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    key, _, value = line.partition(b":")
                    if key.lower() == b"content-length":
                        length = int(value)
                body = await reader.readexactly(length)
            run.timings.append((time.perf_counter() - began) * 1000)
            if b" 200 " not in status_line or b'"errors"' in body:
                found = orjson.loads(body).get("errors") if body.startswith(b"{") else None
                run.errors.append(str(found[0].get("message"))[:120] if found else
                                  status_line.decode().strip())  # fmt: skip
    finally:
        writer.close()
