"""`dra-mirror explain` and `dra-mirror lint`: the diagnostics from a terminal.

    dra-mirror explain NAMESPACE/CLAIM [--cluster C] [--node N…] [--server URL]  ask a mirror
    dra-mirror explain NAMESPACE/CLAIM --kubeconfig PATH [--context CTX]    mirror, ask, stop
    dra-mirror lint FILE|- [--server URL [--cluster C]]                      manifests (offline)
    dra-mirror lint --cluster C [--server URL]                               a mirrored cluster

`explain` sends the graph's `explainClaim` (one aliased field per cluster when `--cluster` is
not given, so a claim name is looked up everywhere in one request) to `--server` (default
`$DRA_MIRROR_SERVER` or http://127.0.0.1:8000), or — with `--kubeconfig` — watches the
kubeconfig's clusters in this process into an in-memory store until each has synced once and
executes the same document against the same schema, in-process. `lint` of a file works offline
with the pure rules; with `--server` the server lints it against the cluster's facts too.
Both print readably, or with `--json` the graph's answer as JSON.

Exit status: 0 with an answer; 1 when the claim is not found, the server cannot be reached or
refuses, or `lint` found an error-severity mistake; 2 for usage errors.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import click
import orjson

DEFAULT_SERVER = "http://127.0.0.1:8000"
TIMEOUT = 60.0

Ask = Callable[[str, Mapping[str, Any]], Awaitable[dict[str, Any]]]

DIAGNOSIS_FIELDS = """cluster namespace name state verdict message holdersTotal nodesWithoutDriver
  pods { namespace name }
  requests { request deviceClassName classExists classDevices freeOrShareable nodes needed
             verdict summary selectors { expression passing rejected }
             selectorErrors { expression message } heldBy { namespace name } }
  holders { claim { namespace name } pods { namespace name } running idle idleSince }
  checks { name ok detail }"""

FINDING_FIELDS = "rule severity object path message"


class AskError(click.ClickException):
    """The server (or the in-process graph) could not answer."""


def explain_document(clusters: list[str] | None) -> str:
    """explainClaim for one cluster (`$cluster`), or one aliased field per named cluster."""
    if clusters is None:
        return (
            "query Explain($cluster: String!, $namespace: String!, $name: String!,"
            " $nodes: [String!]) {"
            " c0: explainClaim(cluster: $cluster, namespace: $namespace, name: $name,"
            f" eligibleNodes: $nodes) {{ {DIAGNOSIS_FIELDS} }} }}"
        )
    fields = [
        f"c{i}: explainClaim(cluster: {orjson.dumps(c).decode()}, namespace: $namespace, "
        f"name: $name, eligibleNodes: $nodes) {{ {DIAGNOSIS_FIELDS} }}"
        for i, c in enumerate(clusters)
    ]
    return (
        "query Explain($namespace: String!, $name: String!, $nodes: [String!]) "
        f"{{ {' '.join(fields)} }}"
    )


async def explain_claim(
    ask: Ask, claim: str, cluster: str | None, nodes: list[str] | None = None
) -> list[dict[str, Any]]:
    """The diagnoses of `namespace/name` (in `cluster`, or in every cluster holding it);
    `nodes`: the nodes its pods may use (their nodeSelector/affinity), when known."""
    namespace, _, name = claim.partition("/")
    if not namespace or not name or "/" in name:
        raise click.UsageError(f"{claim!r}: give the claim as NAMESPACE/CLAIM")
    if cluster is not None:
        data = await ask(
            explain_document(None),
            {"cluster": cluster, "namespace": namespace, "name": name, "nodes": nodes},
        )
    else:
        clusters = [c["name"] for c in (await ask("{ clusters { name } }", {}))["clusters"]]
        if not clusters:
            return []
        data = await ask(
            explain_document(clusters), {"namespace": namespace, "name": name, "nodes": nodes}
        )
    return [d for d in data.values() if d is not None]


# --- how a question reaches a graph ----------------------------------------------------------


def over_http(server: str, token: str | None) -> Callable[[Callable[[Ask], Awaitable[Any]]], Any]:
    """Run a question against a server's /graphql."""
    import httpx

    async def run(question: Callable[[Ask], Awaitable[Any]]) -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx.AsyncClient(base_url=server, timeout=TIMEOUT, headers=headers) as http:

            async def ask(document: str, variables: Mapping[str, Any]) -> dict[str, Any]:
                try:
                    response = await http.post(
                        "/graphql", json={"query": document, "variables": dict(variables)}
                    )
                except httpx.HTTPError as error:
                    raise AskError(f"cannot reach {server}: {error}") from error
                if response.status_code != 200:
                    raise AskError(f"{server} answered {response.status_code}")
                try:
                    body = orjson.loads(response.content)
                except orjson.JSONDecodeError as error:
                    raise AskError(f"{server} did not answer GraphQL JSON") from error
                return _data(body.get("data"), body.get("errors"))

            return await question(ask)

    return run


def in_process(store: Any) -> Ask:
    """Ask the schema in this process, over `store` (what `serve` would answer)."""
    from dra_mirror import schema
    from dra_mirror.schema.context import make_context

    graph = schema.build_schema()

    async def ask(document: str, variables: Mapping[str, Any]) -> dict[str, Any]:
        result = await graph.execute(
            document, variable_values=dict(variables), context_value=make_context(store)
        )
        errors = [{"message": e.message} for e in result.errors or ()]
        return _data(result.data, errors)

    return ask


def _data(data: Any, errors: Any) -> dict[str, Any]:
    if errors:
        raise AskError("; ".join(str(e.get("message", e)) for e in errors))
    if not isinstance(data, dict):
        raise AskError("the graph gave no data")
    return data


async def _mirrored(
    kubeconfig: str, contexts: tuple[str, ...], sync_wait: float, question: Callable[[Ask], Any]
) -> Any:
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
            raise AskError(
                f"clusters not synced after {sync_wait:.0f} s: {'; '.join(watched.not_ready())}"
            ) from error
        return await question(in_process(store))
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
        lines.append(f"  request {r['request']}: {r['verdict']} — {r['summary']}")
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


# --- commands --------------------------------------------------------------------------------


@click.command("explain")
@click.argument("claim", metavar="NAMESPACE/CLAIM")
@click.option("--cluster", default=None, help="The claim's cluster (default: look everywhere).")
@click.option(
    "--server",
    envvar="DRA_MIRROR_SERVER",
    default=None,
    help=f"A running mirror's base URL [env DRA_MIRROR_SERVER; default {DEFAULT_SERVER}].",
)
@click.option("--token", envvar="DRA_MIRROR_TOKEN", default=None, help="Bearer token.")
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="Mirror this kubeconfig's clusters in-process instead of asking a server.",
)
@click.option("--context", "contexts", multiple=True, help="With --kubeconfig: only these.")
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

    def question(ask: Ask) -> Awaitable[list[dict[str, Any]]]:
        return explain_claim(ask, claim, cluster, list(nodes) or None)

    if kubeconfig:
        found = asyncio.run(_mirrored(kubeconfig, contexts, timeout, question))
    else:
        found = asyncio.run(over_http(server or DEFAULT_SERVER, token)(question))
    if not found:
        where = f"cluster {cluster}" if cluster else "any mirrored cluster"
        raise click.ClickException(f"no claim {claim} in {where}")
    _emit(found, as_json, lambda ds: "\n\n".join(render_diagnosis(d) for d in ds))


@click.command("lint")
@click.argument("manifests", type=click.File("r"), required=False, metavar="FILE|-")
@click.option("--server", default=None, help="Lint on this mirror (against a cluster's facts).")
@click.option("--cluster", default=None, help="With --server: the cluster to check against.")
@click.option("--token", envvar="DRA_MIRROR_TOKEN", default=None, help="Bearer token.")
@click.option("--json", "as_json", is_flag=True, help="The findings as JSON.")
def lint(
    manifests: Any, server: str | None, cluster: str | None, token: str | None, as_json: bool
) -> None:
    """The common DRA mistakes in manifests (offline), or in a mirrored cluster (--server)."""
    if manifests is None and not (server and cluster):
        raise click.UsageError("give FILE (or - for stdin), or --server URL --cluster NAME")
    if cluster and not server:
        raise click.UsageError("--cluster needs --server (the mirror that knows the cluster)")
    if server:
        findings = asyncio.run(over_http(server, token)(_lint_remote(manifests, cluster)))
    else:
        findings = _lint_offline(manifests.read())
    _emit(findings, as_json, render_findings)
    if any(f["severity"] == "ERROR" for f in findings):
        sys.exit(1)


def _lint_offline(text: str) -> list[dict[str, Any]]:
    from dra_mirror.service.diagnostics.lint import lint_manifests
    from dra_mirror.service.questions.diagnosis import ManifestError, parse_manifests

    try:
        docs = parse_manifests(text)
    except ManifestError as error:
        raise click.ClickException(str(error)) from error
    return [
        {
            "rule": f.rule,
            "severity": f.severity.upper(),
            "object": f.object,
            "path": f.path,
            "message": f.message,
        }
        for f in lint_manifests(docs, None)
    ]


def _lint_remote(manifests: Any, cluster: str | None) -> Callable[[Ask], Awaitable[Any]]:
    async def question(ask: Ask) -> list[dict[str, Any]]:
        if manifests is None:
            data = await ask(
                f"query Lint($cluster: String!) {{ lint(cluster: $cluster) {{ {FINDING_FIELDS} }} }}",
                {"cluster": cluster},
            )
            return data["lint"]
        data = await ask(
            "query Lint($yaml: String!, $cluster: String) {"
            f" lintManifests(yaml: $yaml, cluster: $cluster) {{ {FINDING_FIELDS} }} }}",
            {"yaml": manifests.read(), "cluster": cluster},
        )
        return data["lintManifests"]

    return question
