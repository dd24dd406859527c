"""`dra-mirror not-busy` and `utilization-audit`: held GPUs that are not busy, now and over time.

    dra-mirror not-busy [--cluster NAME] [--limit 50] [--server URL] [--json]
    dra-mirror utilization-audit [--days 7 | --from T --to T] [--group-by namespace]
                                 [--cluster NAME] [--server URL] [--json]

Asked of a running mirror (`--server`, `--token`, `--json` as for `who-holds`:
`service.cli.client`) that reads dcgm-exporter's series (DRA_MIRROR_UTILIZATION_CONFIG): each
claim below the busy threshold long enough, by whom (its Running pods), since when, how busy
over the window, the energy its devices spent since then and, with a price, its cost. Exit status: 0 with an answer, 1 when the server cannot be
reached, refuses the question or has no utilisation source; 2 for usage errors.

`utilization-audit` asks the history (`utilizationAudit`): per namespace, class, node,
cluster or claim, the GPU-equivalent-hours held, how many of them were busy, and the energy
in kWh, over the last `--days` or [--from, --to). Exit status as above, history instead of a
utilisation source.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import click
import orjson

from dra_mirror.service.cli.asking import run_question
from dra_mirror.service.cli.client import CLUSTER, LIMIT, client_options, emit, table
from dra_mirror.service.questions.utilization import HeldNotBusy

COLUMNS = (
    *("CLUSTER", "CLAIM", "PODS", "NODE", "DEVICES", "BUSY", "NOT-BUSY-SINCE", "KWH", "COST"),
)


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f}h"


@click.command("not-busy")
@CLUSTER
@LIMIT
@client_options
def not_busy(cluster: str | None, limit: int, **client: Any) -> None:
    """Claims held by a Running pod whose GPUs stayed below the busy threshold: by whom, since
    when."""
    answer: HeldNotBusy = run_question(
        client["server"],
        client["token"],
        lambda q: q.held_not_busy(cluster, limit=limit),
        every_cluster=cluster is None,
    )

    def render(a: HeldNotBusy) -> str:
        rows = [
            [
                *(c.cluster, c.claim, ",".join(c.consumers), c.node, ",".join(c.devices)),
                f"{c.busy:.0f}%",
                f"{c.since} ({_hours(c.not_busy_seconds)})",
                "" if c.energy_kwh is None else f"{c.energy_kwh:.2f}",
                "" if c.cost is None else f"{c.cost:.2f}",
            ]
            for c in a.claims
        ]
        head = (
            f"{a.total} held, not busy (below {a.busy_below:g}% for "
            f"{a.not_busy_after / 60:g} min; {a.unknown} without readings)\n"
        )
        return head + table(COLUMNS, rows)

    emit(answer, client["as_json"], render)


AUDIT_COLUMNS = ("CLUSTER", "GROUP", "HELD-H", "BUSY-H", "BUSY", "UNKNOWN-H", "KWH")


def _number(value: float | None, form: str) -> str:
    return "" if value is None else format(value, form)


@click.command("utilization-audit")
@click.option("--days", type=click.FloatRange(0, 400, min_open=True), default=7.0,
              show_default=True, help="The window: the last DAYS (unless --from is given).")  # fmt: skip
@click.option("--from", "start", default=None, help="Window start (RFC 3339).")
@click.option("--to", "end", default=None, help="Window end (RFC 3339; default now).")
@click.option("--group-by", type=click.Choice(["namespace", "class", "node", "cluster", "claim"]),
              default="namespace", show_default=True)  # fmt: skip
@CLUSTER
@client_options
def utilization_audit(
    days: float, start: str | None, end: str | None, group_by: str, cluster: str | None,
    **client: Any,
) -> None:  # fmt: skip
    """GPU-equivalent-hours held against busy, and energy, per group over a window."""
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    now = datetime.now(UTC).replace(microsecond=0)
    end = end or now.strftime(stamp)
    start = start or (now - timedelta(days=days)).strftime(stamp)
    rows = run_question(
        client["server"],
        client["token"],
        lambda q: q.utilization_audit(start, end, group_by, cluster),
    )
    if client["as_json"]:
        click.echo(orjson.dumps(rows, option=orjson.OPT_INDENT_2))
        return
    cells = [
        [r["cluster"], r["group"], f"{r['heldHours']:.1f}", _number(r["busyHours"], ".1f"),
         _number(r["busyPercent"], ".0f") + ("%" if r["busyPercent"] is not None else ""),
         f"{r['unknownHours']:.1f}", _number(r["energyKwh"], ".2f")]
        for r in rows
    ]  # fmt: skip
    click.echo(f"{start} to {end}, GPU-equivalent-hours by {group_by}")
    click.echo(table(AUDIT_COLUMNS, cells))
