"""`dra-mirror persisted-queries`: the hashes a client sends for registered documents.

    dra-mirror persisted-queries PATH…  [--json]   the documents of these files or directories
    dra-mirror persisted-queries --own  [--json]   the mirror's own (screens, command line)

Each document is read as the server reads `DRA_MIRROR_GRAPHQL_PERSISTED_DOCUMENTS`
(`.graphql` files, Apollo manifests, SHA-256 -> text maps; `service.runtime.standalone`) and
checked against the schema and the limits of the current settings; one line per document:

    <sha256>  <operation names>  <file>

`--json` prints Apollo's persisted query manifest instead (`id` is the SHA-256, `body` the
text), which Apollo Client's persisted query link and `gql` read. A document that could not
run ends the command with status 2 and says why.
"""

from __future__ import annotations

from typing import Any

import click
import orjson

from dra_mirror.service.cli.options import build_settings
from dra_mirror.service.cli.preflight import ConfigurationProblem


@click.command("persisted-queries")
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@click.option("--own", is_flag=True, help="The mirror's own documents (screens, command line).")
@click.option("--json", "as_json", is_flag=True, help="Apollo's persisted query manifest.")
@click.pass_context
def persisted_queries(ctx: click.Context, paths: tuple[str, ...], own: bool, as_json: bool) -> None:
    """Print the SHA-256 a client sends for each registered document (and check them)."""
    from dra_mirror.service.runtime.standalone import DocumentsProblem, registered_documents

    if not paths and not own:
        raise click.UsageError("give files or directories of documents, or --own")
    settings = build_settings(ctx)
    try:
        documents = registered_documents(settings, paths, own=own)
    except DocumentsProblem as error:
        raise ConfigurationProblem(str(error)) from None
    if as_json:
        operations: list[dict[str, Any]] = []
        for d in documents:
            names = d.operations
            operations.append(
                {
                    "id": d.sha256,
                    "name": ",".join(n for n, _ in names),
                    "type": names[0][1] if names else "query",
                    "body": d.text,
                }
            )
        manifest = {"format": "apollo-persisted-query-manifest", "version": 1,
                    "operations": operations}  # fmt: skip
        click.echo(orjson.dumps(manifest, option=orjson.OPT_INDENT_2).decode())
        return
    for d in documents:
        listed = ",".join(n for n, _ in d.operations) or "-"
        click.echo(f"{d.sha256}  {listed}  {d.source}")
