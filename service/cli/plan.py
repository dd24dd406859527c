"""`dra-mirror plan FILE|-`: where manifests would land if applied now, or why they would wait.

    dra-mirror plan FILE|- [--cluster C] [--server URL] [--token T] [--json]
                           [--fail-on unplaceable]
    dra-mirror plan FILE|- --kubeconfig PATH [--context CTX]…        mirror, ask, stop

It asks the plan question (`service.questions.plan`) of the mirror at `--server` (default
`$DRA_MIRROR_SERVER` or http://127.0.0.1:8000; the graph's `plan`), or — with `--kubeconfig`
— watches the kubeconfig's clusters in this process until each has synced once and asks the
same question of that store (as `explain --kubeconfig` does). It prints, per cluster, each pod the manifests
would create and where it would run (node and devices), or why it would wait and behind whom;
then lint's findings. `--json` prints the answer's facts (the graph's shape).

Exit status: 0 with an answer (placeable or not; with `--fail-on unplaceable`, only when
every pod would be placed); 1 when the server cannot be reached or refuses, the file is not
YAML, or `--fail-on unplaceable` and a pod would wait; 2 for usage errors.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from typing import Any, TextIO

import click

from dra_mirror.service.cli.asking import DEFAULT_SERVER, refusal, run_question
from dra_mirror.service.cli.diagnostics import (
    TIMEOUT,
    _emit,
    _mirrored,
    mirror_source_options,
    render_findings,
)
from dra_mirror.service.questions.asking import QuestionError
from dra_mirror.service.questions.protocol import Questions


def _ref(obj: Mapping[str, Any]) -> str:
    return f"{obj['namespace']}/{obj['name']}"


def render_plan(plan: Mapping[str, Any]) -> str:
    lines: list[str] = []
    for c in plan["clusters"]:
        lines.append(f"{c['cluster']}: {c['summary']}")
        for item in c["items"]:
            mark = "ok  " if item["placeable"] else "WAIT"
            who = item["name"] if item["kind"] == "Pod" else item["workload"]
            replica = f" (replica {item['replica']})" if item["kind"] == "Pod" else ""
            head = (
                f"  {mark} {item['namespace']}/{who}{replica}"
                if item["kind"] == "Pod"
                else f"  {mark} {who}"
            )
            if item["placeable"]:
                lines.append(f"{head} -> {item['node'] or 'any node'}")
                for claim in item["claims"]:
                    devices = (
                        ", ".join(
                            f"{d['driver']}/{d['pool']}/{d['device']}" for d in claim["devices"]
                        )
                        or "no devices"
                    )
                    note = " (allocated already)" if claim["allocatedBefore"] else ""
                    lines.append(f"       claim {claim['name']}: {devices}{note}")
            else:
                lines.append(f"{head}: {item['verdict'].lower().replace('_', '-')}")
                lines.append(f"       {item['message']}")
                for holder in item["holders"][:10]:
                    state = "idle" + (
                        f" since {holder['idleSince']}" if holder["idleSince"] else ""
                    )
                    pods = ", ".join(_ref(p) for p in holder["pods"]) or "no pod"
                    if " " in holder["claim"]["name"]:  # "<claim> (replica N)": not a real name
                        state, pods = "this plan", "an earlier pod of these manifests"
                    elif not holder["idle"]:
                        state = "in use"
                    lines.append(f"       held by {_ref(holder['claim'])}  {state}  ({pods})")
                if item["holdersHidden"]:
                    lines.append(f"       and {item['holdersHidden']} holder(s) outside your scope")
        if c["findings"]:
            lines.append("  " + render_findings(c["findings"]).replace("\n", "\n  "))
    for skipped in plan["skipped"]:
        lines.append(f"not planned: {skipped}")
    if not plan["clusters"]:
        lines.append("no cluster to plan in (none mirrored, or none in your scope)")
    return "\n".join(lines)


@click.command("plan")
@click.argument("manifests", type=click.File("r"), metavar="FILE|-")
@click.option("--cluster", default=None, help="Plan in this cluster only (default: every one).")
@mirror_source_options
@click.option("--timeout", type=float, default=TIMEOUT, show_default=True, help="Sync wait, s.")
@click.option("--json", "as_json", is_flag=True, help="The plan as JSON.")
@click.option(
    "--fail-on",
    "fail_on",
    type=click.Choice(["unplaceable"]),
    default=None,
    help="Exit 1 when a pod of the manifests would not be placed (for CI pipelines).",
)
def plan(
    manifests: TextIO,
    cluster: str | None,
    server: str | None,
    token: str | None,
    kubeconfig: str | None,
    contexts: tuple[str, ...],
    timeout: float,
    as_json: bool,
    fail_on: str | None,
) -> None:
    """Where manifests would land if applied now (cluster, nodes, devices), or why they wait."""
    if kubeconfig and server:
        raise click.UsageError("give --server or --kubeconfig, not both")
    text = manifests.read()

    def question(questions: Questions) -> Awaitable[dict[str, Any]]:
        return questions.plan(text, cluster)

    if kubeconfig:
        try:
            found = asyncio.run(_mirrored(kubeconfig, contexts, timeout, question))
        except QuestionError as error:
            raise refusal(error) from error
    else:
        found = run_question(server or DEFAULT_SERVER, token, question, timeout=TIMEOUT)
    _emit(found, as_json, render_plan)
    if fail_on == "unplaceable" and unplaceable(found):
        raise SystemExit(1)


def unplaceable(plan: Mapping[str, Any]) -> list[str]:
    """The pods (or workloads) of a plan's answer that would not be placed."""
    return [
        f"{item['namespace']}/{item['name']}"
        for c in plan["clusters"]
        for item in c["items"]
        if not item["placeable"]
    ]
