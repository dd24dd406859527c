"""The demo's Prometheus: Debian's `prometheus`, when installed, scraping the simulator's
dcgm-exporters, so that the demo answers the utilisation questions out of the box.

`DemoPrometheus(demo, workdir)` is a resource of the demo's lifespan, entered after the
simulated clusters listen: it starts `prometheus` on a free loopback port (data and
configuration under `workdir/prometheus`), scraping every `SCRAPE_SECONDS` each cluster's
exporters found by HTTP service discovery (`/sim/dcgm/targets`, labelled with the cluster),
and stops it when the demo stops. It is also the demo's utilisation source: a
`PrometheusSource` over that server once it runs, with the demo's thresholds (`THRESHOLDS`:
below 5 % for one minute, so that a fresh demo shows its idle notebook within minutes, and a
price per kWh, so that its answers carry a cost).

Without the binary (or when it does not start) the demo runs without utilisation and says
so once in the log; nothing else changes. A configured DRA_MIRROR_UTILIZATION_CONFIG wins
over this.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from dra_mirror.service.model.dcgm import Readings
from dra_mirror.service.utilization.config import parse
from dra_mirror.service.utilization.source import PrometheusSource

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
SCRAPE_SECONDS = 5
THRESHOLDS = {
    "busyBelow": 5,
    "notBusyAfterMinutes": 1,
    "stepSeconds": SCRAPE_SECONDS,
    "pricePerKwh": 0.15,  # an illustrative price, so that the demo's answers carry a cost
}


def prometheus_binary() -> str | None:
    return shutil.which("prometheus") or (
        "/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


class DemoPrometheus:
    """A lifespan resource and the demo's `UtilizationReads` (see the module docstring)."""

    busy_below = float(THRESHOLDS["busyBelow"])
    not_busy_after = float(THRESHOLDS["notBusyAfterMinutes"]) * 60
    price_per_kwh = float(THRESHOLDS["pricePerKwh"])

    def __init__(self, demo: Any, workdir: Path, *, binary: str | None = None) -> None:
        self.demo, self.directory = demo, workdir / "prometheus"
        self.binary = binary if binary is not None else prometheus_binary()
        self.url: str | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._source: PrometheusSource | None = None

    def covers(self, cluster: str) -> bool:
        return self._source is not None and self._source.covers(cluster)

    async def readings(self, cluster: str, start: float, end: float) -> Readings:
        assert self._source is not None
        return await self._source.readings(cluster, start, end)

    async def buckets(self, cluster: str, start: int, end: int) -> Readings:
        assert self._source is not None
        return await self._source.buckets(cluster, start, end)

    async def __aenter__(self) -> DemoPrometheus:
        if not self.binary:
            log.info("demo: no prometheus installed: utilisation questions are off")
            return self
        sim = self.demo.simulator
        clusters = sorted(sim.clusters) if sim is not None else []
        try:
            self.url = await asyncio.to_thread(self._start, sim, clusters)
        except OSError as error:
            log.warning("demo: prometheus did not start (%s): utilisation questions are off", error)
            self._stop()
            return self
        config = {
            **THRESHOLDS,
            "clusters": {c: {"url": self.url, "selector": f'cluster="{c}"'} for c in clusters},
        }
        self._source = PrometheusSource(parse(config, where="demo"))
        log.info("demo: prometheus at %s scrapes the simulated dcgm-exporters", self.url)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._source is not None:
            await self._source.aclose()
            self._source = None
        await asyncio.to_thread(self._stop)

    def _start(self, sim: Any, clusters: list[str]) -> str:
        self.directory.mkdir(parents=True, exist_ok=True)
        every = f"{SCRAPE_SECONDS}s"
        config = {
            "global": {"scrape_interval": every, "evaluation_interval": every},
            "scrape_configs": [
                {
                    "job_name": "dcgm-exporter",
                    "http_sd_configs": [
                        {"url": f"{sim.url(c)}/sim/dcgm/targets", "refresh_interval": every}
                        for c in clusters
                    ],
                }
            ],
        }
        path = self.directory / "prometheus.yml"
        path.write_text(yaml.safe_dump(config))
        port = _free_port()
        command = [
            str(self.binary),
            f"--config.file={path}",
            f"--storage.tsdb.path={self.directory / 'data'}",
            f"--web.listen-address={HOST}:{port}",
            "--log.level=warn",
        ]
        with (self.directory / "prometheus.log").open("wb") as out:
            self._process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        url = f"http://{HOST}:{port}"
        deadline = time.monotonic() + 30
        while not _ready(url):
            if self._process.poll() is not None or time.monotonic() > deadline:
                raise OSError(f"not ready; see {self.directory / 'prometheus.log'}")
            time.sleep(0.1)
        return url

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(20)


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False
