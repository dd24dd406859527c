"""`dra-mirror not-busy`: claims held by a Running pod whose GPUs are not busy.

    dra-mirror not-busy [--cluster NAME] [--limit 50] [--server URL] [--json]

Asked of a running mirror (`--server`, `--token`, `--json` as for `who-holds`:
`service.cli.client`) that reads dcgm-exporter's series (DRA_MIRROR_UTILIZATION_CONFIG): each
claim below the busy threshold long enough, by whom (its Running pods), since when, how busy
over the window, the energy its devices spent since then and, with a price, its cost. Exit status: 0 with an answer, 1 when the server cannot be
reached, refuses the question or has no utilisation source; 2 for usage errors.
"""

from __future__ import annotations

from typing import Any

import click

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
