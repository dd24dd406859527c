"""`dra-mirror sim`: serve simulated clusters (a scenario) with a Kubernetes API kubectl can use.

    dra-mirror sim --scenario FILE|NAME [--kubeconfig-out PATH] [--host H] [--port-base N]
    dra-mirror sim --list-scenarios

One port per cluster (free ports unless `--port-base`), a kubeconfig with one context per
cluster; the scenario's churn runs until Ctrl-C or SIGTERM. The scenario format is described in
docs/simulator.md.

Promises: a scenario that does not load is a usage error (exit 2) before anything listens; a
port that is taken (`--port-base` on a busy port) ends it with exit 1 and the cluster, the
address and the reason on stderr, never a traceback; the kubeconfig it wrote is removed when
it stops (its servers are gone), unless something else replaced it meanwhile.
"""

from __future__ import annotations

import click

from dra_mirror.service.cli.options import build_settings
from dra_mirror.service.cli.running import run


@click.command()
@click.option("--scenario", default=None, help="A shipped scenario name or a YAML file.")
@click.option(
    "--kubeconfig-out",
    type=click.Path(dir_okay=False),
    default="sim.kubeconfig",
    show_default=True,
    help="Where to write the kubeconfig (one context per cluster).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port-base", type=int, default=None, help="First port (one per cluster); default: free ports."
)
@click.option("--list-scenarios", is_flag=True, help="List the shipped scenarios and exit.")
@click.pass_context
def sim(
    ctx: click.Context,
    scenario: str | None,
    kubeconfig_out: str,
    host: str,
    port_base: int | None,
    list_scenarios: bool,
) -> None:
    """Serve simulated clusters (a scenario) with a Kubernetes API kubectl can use."""
    build_settings(ctx)
    from dra_mirror.service.sim import scenario as scenarios

    if list_scenarios:
        for name in scenarios.list_scenarios():
            click.echo(name)
        return
    if not scenario:
        raise click.UsageError("give --scenario NAME|FILE (see --list-scenarios)")
    try:
        scenarios.load_scenario(scenario)
    except (scenarios.ScenarioError, OSError) as error:
        raise click.UsageError(f"--scenario {scenario}: {error}") from error
    from dra_mirror.service.sim.run import PortInUse

    try:
        run(
            scenarios.serve_scenario(
                scenario,
                kubeconfig_path=kubeconfig_out,
                port_base=port_base,
                host=host,
                announce=lambda text: click.echo(text),
            )
        )
    except PortInUse as error:
        raise click.ClickException(str(error)) from None
