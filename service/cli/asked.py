"""`dra-mirror capacity|fragmentation|pod-devices|device-history`: more of the mirror's
questions, asked of a running mirror (`--server`, `--token`, `--json` as for `who-holds`:
`service.cli.client`).

    dra-mirror capacity [--cluster NAME]                 devices per cluster and driver
    dra-mirror fragmentation [--cluster NAME] [--node NODE] [--class CLASS]
                                                         stranded GPU memory, largest partition
    dra-mirror pod-devices NAMESPACE/POD [--cluster NAME] a pod's claims and their devices
    dra-mirror device-history DEVICE [--hours 24] [--cluster NAME]   who held it, from history

Exit status: 0 with an answer, 1 when the server cannot be reached or refuses the question,
the cluster has not synced yet, the pod is nowhere, or history is off; 2 for usage errors and a
`--cluster` the mirror does not know.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import click
import orjson

from dra_mirror.service.cli.asking import run_question
from dra_mirror.service.cli.client import CLUSTER, client_options, emit, table
from dra_mirror.service.questions.capacity import CapacityRow
from dra_mirror.service.questions.fragmentation import NodeFragmentation
from dra_mirror.service.questions.pods import PodDevices

CAPACITY_COLUMNS = (
    *("CLUSTER", "DRIVER", "TYPE", "PHYSICAL", "P-FREE", "P-WHOLE", "P-PARTITIONED"),
    *("P-SHARED", "HELD-EQUIVALENTS"),
    *("DEVICES", "FREE", "IN-USE", "PARTITIONED", "TAINTED"),
    *("PARTITIONS", "PARTITIONS-IN-USE", "UNPUBLISHED"),
)


@click.command("capacity")
@CLUSTER
@client_options
def capacity(cluster: str | None, **client: Any) -> None:
    """Physical devices and devices per cluster and driver, and what they do now (PHYSICAL and
    P-*: a GPU with its partitions is one, HELD-EQUIVALENTS in GPU-equivalents; DEVICES and the
    rest in devices of each driver, a partition not counted beside its whole device)."""
    rows: list[CapacityRow] = run_question(
        client["server"], client["token"], lambda q: q.capacity(cluster),
        every_cluster=cluster is None,
    )  # fmt: skip
    if client["as_json"]:
        click.echo(orjson.dumps(rows, option=orjson.OPT_INDENT_2))
        return
    cells = [
        [r.cluster, r.driver, r.type, r.physical, r.physical_free, r.physical_whole,
         r.physical_partitioned, r.physical_shared, f"{r.held_equivalents:g}",
         r.devices, r.free, r.in_use, r.partitioned, r.tainted,
         r.partitions, r.partitions_in_use, r.unpublished]
        for r in rows
    ]  # fmt: skip
    click.echo(table(CAPACITY_COLUMNS, cells))


FRAGMENTATION_COLUMNS = (
    *("CLUSTER", "NODE", "CLASS", "GPUS", "PARTLY-ALLOCATED", "PLACEABLE", "FREE-GIB"),
    *("STRANDED-GIB", "LARGEST-PLACEABLE"),
)
GIB = float(1 << 30)


@click.command("fragmentation")
@CLUSTER
@click.option("--node", default=None, help="Only this node.")
@click.option("--class", "class_name", default=None, help="Only this DeviceClass.")
@client_options
def fragmentation(
    cluster: str | None, node: str | None, class_name: str | None, **client: Any
) -> None:
    """Partitionable GPUs per node and DeviceClass: how many can take one of the class's
    devices now, the largest that fits, and free memory stranded on partly allocated GPUs
    (GiB; a GPU's memory is its counter set's `memory` counter)."""
    rows: list[NodeFragmentation] = run_question(
        client["server"], client["token"],
        lambda q: q.fragmentation(cluster, node=node, class_name=class_name),
        every_cluster=cluster is None,
    )  # fmt: skip
    if client["as_json"]:
        click.echo(orjson.dumps(rows, option=orjson.OPT_INDENT_2))
        return
    cells = [
        [r.cluster, r.node or "-", r.class_name, r.gpus, r.gpus_partly_allocated,
         r.gpus_placeable, f"{r.free_memory / GIB:.1f}", f"{r.stranded_memory / GIB:.1f}",
         r.largest_placeable or "-"]
        for r in rows
    ]  # fmt: skip
    click.echo(table(FRAGMENTATION_COLUMNS, cells))
    for r in rows:
        click.echo(f"{r.node or '-'} {r.class_name}: {r.summary}")


def _split(target: str) -> tuple[str, str]:
    namespace, _, name = target.partition("/")
    if not namespace or not name or "/" in name:
        raise click.UsageError(f"{target!r}: give the pod as NAMESPACE/POD")
    return namespace, name


@click.command("pod-devices")
@click.argument("pod", metavar="NAMESPACE/POD")
@CLUSTER
@client_options
def pod_devices(pod: str, cluster: str | None, **client: Any) -> None:
    """The ResourceClaims a pod uses and the devices allocated to them."""
    namespace, name = _split(pod)
    found: list[PodDevices] = run_question(
        client["server"],
        client["token"],
        lambda q: q.pod_devices(namespace, name, cluster),
        every_cluster=cluster is None,
    )
    if not found:
        where = f"cluster {cluster}" if cluster else "any mirrored cluster"
        raise click.ClickException(f"no pod {pod} in {where}")
    if client["as_json"]:
        click.echo(orjson.dumps(found, option=orjson.OPT_INDENT_2))
        return
    for answer in found:

        def render(a: PodDevices) -> str:
            head = f"{a.namespace}/{a.pod} in {a.cluster} ({a.phase}, {a.node or 'not scheduled'})"
            rows = [[d.claim, d.request, d.device, d.uuid, d.model, d.node, (d.status or "").lower()]
                    for d in a.devices]  # fmt: skip
            lines = [head, table(["CLAIM", "REQUEST", "DEVICE", "UUID", "MODEL", "NODE",
                                  "STATUS"], rows)]  # fmt: skip
            lines += [f"claim {c}: not allocated yet" for c in a.pending]
            lines += [f"claim {c}: not there" for c in a.missing]
            return "\n".join(lines)

        emit(answer, False, render)


@click.command("device-history")
@click.argument("device")
@click.option("--hours", type=click.FloatRange(0, 2160, min_open=True), default=24.0,
              show_default=True, help="How far back.")  # fmt: skip
@CLUSTER
@client_options
def device_history(device: str, hours: float, cluster: str | None, **client: Any) -> None:
    """Who held DEVICE over the last hours, from the mirror's history."""
    end = datetime.now(UTC).replace(microsecond=0)
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    start = (end - timedelta(hours=hours)).strftime(stamp)
    timelines = run_question(
        client["server"],
        client["token"],
        lambda q: q.device_history(device, start, end.strftime(stamp), cluster),
    )
    if client["as_json"]:
        click.echo(orjson.dumps(timelines, option=orjson.OPT_INDENT_2))
        return
    rows = [
        [a["cluster"], a["device"], a["uuid"], f"{a['namespace']}/{a['claim']}", a["since"],
         a["until"] or "now", a["endReason"]]
        for t in timelines
        for a in t["allocations"]
    ]  # fmt: skip
    click.echo(f"{len(rows)} holding(s) in the last {hours:g} h")
    click.echo(table(["CLUSTER", "DEVICE", "UUID", "CLAIM", "SINCE", "UNTIL", "ENDED"], rows))
