"""`dra-mirror who-holds|free|waiting|idle`: the on-call questions from a terminal.

These commands ask a running mirror (`--server URL`, default `$DRA_MIRROR_SERVER` or
http://127.0.0.1:8000; `service.cli.asking`) the questions of `service.questions` over its
`/graphql` (`RemoteQuestions`), and get the very answers Slack and the MCP tools give.
`--token` (or `$DRA_MIRROR_TOKEN`) is sent as `Authorization: Bearer …` for servers with
access control. Output is a readable table, or with `--json` the answer as JSON (one object,
stable keys).

    dra-mirror who-holds GPU-21f6a090-…            dra-mirror who-holds east-h200-0/gpu-0 --cluster east
    dra-mirror free [CLASS] [--cluster NAME]       dra-mirror waiting [CLASS] [--cluster NAME]
    dra-mirror idle [--cluster NAME]

(`capacity`, `pod-devices` and `device-history` are `service.cli.asked`; `explain` and `lint`
`service.cli.diagnostics`.)

Exit status: 0 with an answer (an empty one included), 1 when the server cannot be reached or
refuses the question, the cluster is not mirrored, or the device or DeviceClass named does not
exist (the reason on stderr), 2 for usage errors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click
import orjson

from dra_mirror.service.cli.asking import DEFAULT_SERVER, run_question
from dra_mirror.service.questions.claims import Claims, duration
from dra_mirror.service.questions.free import Free
from dra_mirror.service.questions.holdings import HoldingRow, WhoHolds

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Answer = TypeVar("Answer", bound="DataclassInstance")  # the rows of a question
F = TypeVar("F", bound=Callable[..., Any])


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns padded to their widest cell; `-` for missing values."""
    cells = [[("-" if v in (None, "", []) else str(v)) for v in row] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    lines = [columns, *cells]
    return "\n".join(
        "  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def emit(answer: Answer, as_json: bool, render: Callable[[Answer], str]) -> None:
    if as_json:
        click.echo(orjson.dumps(dataclasses.asdict(answer), option=orjson.OPT_INDENT_2))
    else:
        click.echo(render(answer))


def client_options(command: F) -> F:
    options = [
        click.option(
            "--server",
            envvar="DRA_MIRROR_SERVER",
            default=DEFAULT_SERVER,
            show_default=True,
            help="The mirror's base URL [env DRA_MIRROR_SERVER].",
        ),
        click.option(
            "--token",
            envvar="DRA_MIRROR_TOKEN",
            default=None,
            help="Sent as 'Authorization: Bearer TOKEN' [env DRA_MIRROR_TOKEN].",
        ),
        click.option("--json", "as_json", is_flag=True, help="The answer as JSON."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


CLUSTER = click.option("--cluster", default=None, help="Only this cluster.")
LIMIT = click.option("--limit", type=int, default=50, show_default=True, help="Rows at most.")


@click.command("who-holds")
@click.argument("device")
@CLUSTER
@client_options
def who_holds(
    device: str, cluster: str | None, server: str, token: str | None, as_json: bool
) -> None:
    """Claims holding DEVICE: a uuid (GPU-…, MIG-…), NODE/DEVICE, DRIVER/POOL/DEVICE or a name."""
    answer: WhoHolds = run_question(server, token, lambda q: q.who_holds(device, cluster))
    if answer.unknown:
        where = f"cluster {cluster}" if cluster else "any mirrored cluster"
        raise click.ClickException(
            f"{device} matches no device in {where} (a uuid, NODE/DEVICE, DRIVER/POOL/DEVICE "
            "or a device name; `dra-mirror free` lists free devices)"
        )
    if as_json:
        body = dataclasses.asdict(answer) | {"ambiguous": answer.ambiguous}
        click.echo(orjson.dumps(body, option=orjson.OPT_INDENT_2))
        return
    if not answer.holdings and answer.withheld:
        click.echo(f"{device} is held in another namespace "
                   f"({answer.held_elsewhere} allocation(s) you may not see)")  # fmt: skip
        return
    if not answer.holdings:
        states = sorted({(d.status or "gone").lower() for d in answer.devices})
        click.echo(f"no claim holds {device}: it is {' or '.join(states)}")
        return
    if answer.ambiguous:
        click.echo(f"{device} names {len(answer.held_devices)} held devices:", err=True)
    click.echo(table(HOLDING_COLUMNS, [holding_row(h) for h in answer.holdings]))


HOLDING_COLUMNS: tuple[str, ...] = (
    *("CLUSTER", "NODE", "DEVICE", "UUID", "MODEL", "CLAIM", "ORIGIN", "STATE"),
    *("PODS", "SINCE", "IDLE-SINCE"),
)
IDLE_COLUMNS: tuple[str, ...] = (
    *("CLUSTER", "CLAIM", "ORIGIN", "NODE", "DEVICES", "IDLE-SINCE", "PODS"),
    "WAITING-FOR-CLASS",
)


def holding_row(h: HoldingRow) -> list[Any]:
    idle_since = h.idle_since if h.idle else None
    return [
        *(h.cluster, h.node, h.device, h.uuid, h.model, h.claim, h.origin.lower()),
        *(h.state.lower(), ",".join(h.pods), h.since, idle_since),
    ]


@click.command("free")
@click.argument("class_name", metavar="[CLASS]", required=False)
@CLUSTER
@LIMIT
@client_options
def free(class_name: str | None, cluster: str | None, limit: int, **client: Any) -> None:
    """Free devices (of a DeviceClass, in a cluster), in devices: the free partitions of a
    free GPU are shown beside it, not counted."""
    answer: Free = run_question(
        client["server"], client["token"], lambda q: q.free(class_name, cluster, limit=limit)
    )

    def render(a: Free) -> str:
        columns = ["CLUSTER", "NODE", "DEVICE", "UUID", "MODEL"]
        rows = [[d.cluster, d.node, d.device, d.uuid, d.model] for d in a.devices]
        if any(d.partitions for d in a.devices):  # the same hardware, not counted again
            columns.append("FREE-PARTITIONS")
            rows = [
                [*r, str(len(d.partitions)) if d.partitions else None]
                for r, d in zip(rows, a.devices, strict=True)
            ]
        if any(d.taints for d in a.devices):  # free only for claims tolerating these
            columns.append("TAINTS")
            rows = [[*r, ", ".join(d.taints) or None] for r, d in zip(rows, a.devices, strict=True)]
        more = f"\n… {a.total - len(rows)} more" if a.total > len(rows) else ""
        partitions = f" (and {a.partitions} free partitions of them)" if a.partitions else ""
        return f"{a.total} free{partitions}\n" + table(columns, rows) + more

    emit(answer, client["as_json"], render)


@click.command("waiting")
@click.argument("class_name", metavar="[CLASS]", required=False)
@CLUSTER
@LIMIT
@client_options
def waiting(class_name: str | None, cluster: str | None, limit: int, **client: Any) -> None:
    """Claims waiting for devices (Pending), longest waiting first."""
    answer: Claims = run_question(
        client["server"], client["token"], lambda q: q.waiting(class_name, cluster, limit=limit)
    )

    def render(a: Claims) -> str:
        rows = [
            [c.cluster, c.claim, c.origin.lower(), ",".join(c.classes), _seconds(c.pending_seconds)]
            for c in a.claims
        ]
        return f"{a.total} waiting\n" + table(
            ["CLUSTER", "CLAIM", "ORIGIN", "CLASSES", "WAITING"], rows
        )

    emit(answer, client["as_json"], render)


@click.command("idle")
@CLUSTER
@LIMIT
@client_options
def idle(cluster: str | None, limit: int, **client: Any) -> None:
    """Claims holding devices with no consumer pod Running, those others wait behind first."""
    answer: Claims = run_question(
        client["server"], client["token"], lambda q: q.idle(cluster, limit=limit)
    )

    def render(a: Claims) -> str:
        rows: list[list[Any]] = [
            [
                *(c.cluster, c.claim, c.origin.lower(), c.node, ",".join(c.devices)),
                *(c.idle_since, ",".join(c.consumers), c.waiting_for_class),
            ]
            for c in a.claims
        ]
        return f"{a.total} idle\n" + table(IDLE_COLUMNS, rows)

    emit(answer, client["as_json"], render)


def _seconds(value: float | None) -> str | None:
    return duration(value) if value is not None else None
