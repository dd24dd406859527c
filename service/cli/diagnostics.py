"""`dra-mirror explain` and `dra-mirror lint`: the diagnostics from a terminal.

    dra-mirror explain NAMESPACE/CLAIM [--cluster C] [--node N…] [--server URL]  ask a mirror
    dra-mirror explain NAMESPACE/CLAIM --kubeconfig PATH [--context CTX]    mirror, ask, stop
    dra-mirror lint FILE|- [--cluster C [--server URL]]                      manifests (offline)
    dra-mirror lint --cluster C [--server URL]                               a mirrored cluster

The questions are `service.questions.explain` and `service.questions.lint`. `explain` asks the
mirror at `--server` (default `$DRA_MIRROR_SERVER` or http://127.0.0.1:8000; the graph's
`explainClaim`, one aliased field per cluster when `--cluster` is not given, so a claim name
is looked up everywhere in one request), or — with `--kubeconfig` — watches the kubeconfig's
clusters in this process into an in-memory store until each has synced once and asks the same
question of that store (`LocalQuestions`). `lint` of a file works offline with the pure rules;
with `--cluster` (and `--server`, by default `$DRA_MIRROR_SERVER` or the local mirror) the
server lints it against that cluster's facts too. Both print readably, or with `--json` the
answer's facts (the graph's shape) as JSON.

Exit status: 0 with an answer; 1 when the claim is not found, the server cannot be reached or
refuses, or `lint` found an error-severity mistake; 2 for usage errors.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TextIO, TypeVar

import click
import orjson

from dra_mirror.service.cli.asking import DEFAULT_SERVER, run_question
from dra_mirror.service.questions.asking import QuestionError
from dra_mirror.service.questions.diagnosis import ManifestError
from dra_mirror.service.questions.lint import lint_text
from dra_mirror.service.questions.protocol import Questions

TIMEOUT = 60.0

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def split_claim(claim: str) -> tuple[str, str]:
    """(namespace, name) of `NAMESPACE/CLAIM`; a usage error for anything else."""
    namespace, _, name = claim.partition("/")
    if not namespace or not name or "/" in name:
        raise click.UsageError(f"{claim!r}: give the claim as NAMESPACE/CLAIM")
    return namespace, name


def over_store(store: Any) -> Questions:
    """The questions answered in this process from `store` (what `serve` would answer)."""
    from dra_mirror.service.questions.asker import Asker
    from dra_mirror.service.questions.local import LocalQuestions

    return LocalQuestions(Asker.over(store))


async def _mirrored(
    kubeconfig: str,
    contexts: tuple[str, ...],
    sync_wait: float,
    question: Callable[[Questions], Awaitable[T]],
) -> T:
    """Watch the kubeconfig's clusters into memory until each synced, ask, stop watching."""
    from dra_mirror.service.runtime.watching import watch_clusters
    from dra_mirror.service.stores.memory import MemoryStore

    store = MemoryStore()
    watched = await watch_clusters(kubeconfig, contexts, store=store)
    try:
        try:
            async with asyncio.timeout(sync_wait):
                await watched.wait_synced()
        except TimeoutError as error:
            raise click.ClickException(
                f"clusters not synced after {sync_wait:.0f} s: {'; '.join(watched.not_ready())}"
            ) from error
        return await question(over_store(store))
    finally:
        await watched.stop()


# --- output ----------------------------------------------------------------------------------


def _ref(obj: Mapping[str, Any]) -> str:
    return f"{obj['namespace']}/{obj['name']}" if obj.get("namespace") else obj["name"]


def render_diagnosis(d: Mapping[str, Any]) -> str:
    lines = [
        f"{d['namespace']}/{d['name']} in {d['cluster']} ({d['state']}): {d['verdict']}",
        f"  {d['message']}",
    ]
    for r in d["requests"]:
        said = d["message"].startswith(f"request {r['request']}:")  # the headline is this one
        summary = "" if said else f" — {r['summary']}"
        lines.append(f"  request {r['request']}: {r['verdict']}{summary}")
        cls = r["deviceClassName"] or "-"
        covers = f"covers {r['classDevices']} devices" if r["classExists"] else "does not exist"
        lines.append(f"    class {cls} {covers}")
        for s in r["selectors"]:
            lines.append(
                f"    selector {s['expression']!r}: {s['passing']} pass, {s['rejected']} rejected"
            )
        for e in r["selectorErrors"]:
            lines.append(f"    selector {e['expression']!r} FAILED: {e['message']}")
        where = f" on {', '.join(r['nodes'])}" if r["nodes"] else ""
        lines.append(f"    free or shareable: {r['freeOrShareable']} (needs {r['needed']}){where}")
    if d["holders"]:
        lines.append(f"  held by ({d['holdersTotal']}):")
        for h in d["holders"]:
            state = "idle" + (f" since {h['idleSince']}" if h["idleSince"] else "")
            pods = ", ".join(_ref(p) for p in h["pods"]) or "no pod"
            lines.append(f"    {_ref(h['claim'])}  {state if h['idle'] else 'in use'}  ({pods})")
    if d.get("holdersHidden"):
        if not d["holders"]:
            lines.append(f"  held by ({d['holdersTotal']}):")
        lines.append(f"    and {d['holdersHidden']} claim(s) outside your scope")
    for c in d["checks"]:
        lines.append(f"  [{'x' if c['ok'] else ' '}] {c['name']}: {c['detail']}")
    if d["nodesWithoutDriver"]:
        lines.append(f"  GPU nodes without the driver: {', '.join(d['nodesWithoutDriver'])}")
    if d["pods"]:
        lines.append(f"  pods: {', '.join(_ref(p) for p in d['pods'])}")
    return "\n".join(lines)


def render_findings(findings: list[Mapping[str, Any]]) -> str:
    if not findings:
        return "no findings"
    lines = [
        f"{f['severity'].lower():7} {f['rule']:24} {f['object']}  {f['path']}\n        {f['message']}"
        for f in findings
    ]
    return "\n".join(lines)


def _emit(value: Any, as_json: bool, render: Callable[[Any], str]) -> None:
    if as_json:
        click.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo(render(value))


def mirror_source_options(command: F) -> F:
    """Where a diagnostic command gets its mirror: a running server (`--server`, `--token`),
    or the clusters of a kubeconfig mirrored in-process (`--kubeconfig`, `--context`)."""
    for option in reversed(
        [
            click.option(
                "--server",
                envvar="DRA_MIRROR_SERVER",
                default=None,
                show_default=DEFAULT_SERVER,
                help="A running mirror's base URL.",
            ),
            click.option("--token", envvar="DRA_MIRROR_TOKEN", default=None, help="Bearer token."),
            click.option(
                "--kubeconfig",
                type=click.Path(dir_okay=False, exists=True),
                default=None,
                help="Mirror this kubeconfig's clusters in-process instead of asking a server.",
            ),
            click.option(
                "--context", "contexts", multiple=True, help="With --kubeconfig: only these."
            ),
        ]
    ):
        command = option(command)
    return command


# --- commands --------------------------------------------------------------------------------


@click.command("explain")
@click.argument("claim", metavar="NAMESPACE/CLAIM")
@click.option("--cluster", default=None, help="The claim's cluster (default: look everywhere).")
@mirror_source_options
@click.option(
    "--node",
    "nodes",
    multiple=True,
    help="A node the claim's pods may use; repeatable (default: those their nodeSelector "
    "and required node affinity admit).",
)
@click.option("--timeout", type=float, default=TIMEOUT, show_default=True, help="Sync wait, s.")
@click.option("--json", "as_json", is_flag=True, help="The diagnoses as JSON.")
def explain(
    claim: str,
    cluster: str | None,
    server: str | None,
    token: str | None,
    kubeconfig: str | None,
    contexts: tuple[str, ...],
    nodes: tuple[str, ...],
    timeout: float,
    as_json: bool,
) -> None:
    """Why a claim is Pending, or whether an allocated one is healthy (explainClaim)."""
    if kubeconfig and server:
        raise click.UsageError("give --server or --kubeconfig, not both")
    namespace, name = split_claim(claim)

    def question(questions: Questions) -> Awaitable[list[dict[str, Any]]]:
        return questions.explain(namespace, name, cluster, list(nodes) or None)

    if kubeconfig:
        try:
            found = asyncio.run(_mirrored(kubeconfig, contexts, timeout, question))
        except QuestionError as error:
            raise click.ClickException(str(error)) from error
    else:
        found = run_question(server or DEFAULT_SERVER, token, question, timeout=TIMEOUT)
    if not found:
        where = f"cluster {cluster}" if cluster else "any mirrored cluster"
        raise click.ClickException(f"no claim {claim} in {where}")
    _emit(found, as_json, lambda ds: "\n\n".join(render_diagnosis(d) for d in ds))


@click.command("lint")
@click.argument("manifests", type=click.File("r"), required=False, metavar="FILE|-")
@click.option(
    "--server",
    default=None,
    show_default=f"FILE offline; with --cluster $DRA_MIRROR_SERVER or {DEFAULT_SERVER}",
    help="Lint on this mirror (against a cluster's facts).",
)
@click.option("--cluster", default=None, help="The mirrored cluster to check (or check against).")
@click.option("--token", envvar="DRA_MIRROR_TOKEN", default=None, help="Bearer token.")
@click.option("--json", "as_json", is_flag=True, help="The findings as JSON.")
def lint(
    manifests: TextIO | None,
    server: str | None,
    cluster: str | None,
    token: str | None,
    as_json: bool,
) -> None:
    """The common DRA mistakes in manifests (offline), or in a mirrored cluster (--server)."""
    if manifests is None and not cluster:
        raise click.UsageError("give FILE (or - for stdin), or --cluster NAME")
    if cluster and not server:  # the mirror that knows the cluster: the local one by default
        server = os.environ.get("DRA_MIRROR_SERVER") or DEFAULT_SERVER
    if server:
        findings = run_question(server, token, _lint_remote(manifests, cluster), timeout=TIMEOUT)
    elif manifests is not None:
        try:
            findings = lint_text(manifests.read())
        except ManifestError as error:
            raise click.ClickException(str(error)) from error
    else:  # refused above already; said again for the type checker
        raise click.UsageError("give FILE (or - for stdin)")
    _emit(findings, as_json, render_findings)
    if any(f["severity"] == "ERROR" for f in findings):
        sys.exit(1)


def _lint_remote(
    manifests: TextIO | None, cluster: str | None
) -> Callable[[Questions], Awaitable[list[dict[str, Any]]]]:
    async def question(questions: Questions) -> list[dict[str, Any]]:
        if manifests is None:
            if cluster is None:
                raise QuestionError("give FILE (or - for stdin), or --cluster NAME")
            return await questions.lint(cluster)
        return await questions.lint_manifests(manifests.read(), cluster)

    return question
