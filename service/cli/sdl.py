"""`dra-mirror schema`: print the GraphQL SDL the server serves, or write the committed copy.

    dra-mirror schema [--write [--output PATH]]

`schema/schema.graphql` is the printed contract other tools read; `tests/schema/test_sdl.py`
fails when it is stale, and `dra-mirror schema --write` rewrites it. The SDL is the schema's
as the server builds it (`service.runtime.standalone`).
"""

from __future__ import annotations

from pathlib import Path

import click


@click.command("schema")
@click.option("--write", is_flag=True, help="Write schema/schema.graphql instead of printing.")
@click.option(
    "--output",
    type=click.Path(dir_okay=False),
    default=None,
    help="With --write: the file to write (default: the committed schema.graphql).",
)
def schema_command(write: bool, output: str | None) -> None:
    """Print the GraphQL SDL (or write the committed copy)."""
    from dra_mirror.service.runtime import standalone

    if write:
        path = standalone.write_sdl(Path(output) if output else None)
        click.echo(f"wrote {path}")
    else:
        click.echo(standalone.print_sdl(), nl=False)
