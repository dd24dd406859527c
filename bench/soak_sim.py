"""One simulator process of the soak (bench/soak.py starts `--sim-processes` of them).

    .venv/bin/python bench/soak_sim.py SCENARIO_FILE KUBECONFIG WINDOW

Serves the scenario's clusters as `dra-mirror sim --scenario` does, with an event window of
WINDOW events per cluster, and writes how far each cluster's churn is behind its plan to
`KUBECONFIG.behind` every 5 s. Runs until stopped (SIGTERM). Not a benchmark.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def serve_sim(scenario_file: str, kubeconfig: str, window: int) -> None:
    """The simulator of the soak: what `dra-mirror sim --scenario` runs (serve_scenario), with
    a shorter event window, what it retains frozen out of the cyclic collector every 30 s
    (`gc.freeze`: full collections over its gigabyte of retained events stalled it for tens
    of seconds at 2,000 writes/s; frozen objects are still freed by reference counting when
    the window drops them), and every 5 s how far each cluster's churn is behind its plan
    written next to the kubeconfig (`<kubeconfig>.behind`, JSON): a simulator starved of CPU
    makes fewer writes than asked, which the soak reports as the reason."""
    import gc
    import json

    from dra_mirror.service.sim import store
    from dra_mirror.service.sim.run import serve_forever
    from dra_mirror.service.sim.scenario import build_world, load_scenario

    store.ClusterStore.__init__.__kwdefaults__["window"] = window
    behind_file = Path(f"{kubeconfig}.behind")

    async def run() -> None:
        world = build_world(load_scenario(scenario_file))
        gc.freeze()

        async def housekeeping() -> None:
            for tick in range(10**9):
                await asyncio.sleep(5)
                behind_file.write_text(  # noqa: ASYNC240 (a few bytes)
                    json.dumps({name: c.behind() for name, c in world.churns.items()})
                )
                if tick % 6 == 5:
                    gc.freeze()

        tasks = [asyncio.create_task(world.run()), asyncio.create_task(housekeeping())]
        try:
            await serve_forever(world.specs, kubeconfig_path=kubeconfig, announce=lambda _: None)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(run())


if __name__ == "__main__":
    serve_sim(sys.argv[1], sys.argv[2], int(sys.argv[3]))
