"""A private Prometheus server for the utilisation tests: Debian's `prometheus` on loopback.

    with PrometheusServer(tmp_path, targets=[sim.url("east") + "/sim/dcgm/targets"]) as prom:
        prom.url                     # http://127.0.0.1:<free port>

It scrapes every target that Prometheus' HTTP service discovery finds at `targets` (the
simulator's dcgm-exporters) every `interval` seconds, keeps its data under the given
directory, and is stopped (SIGTERM, then SIGKILL) when the block ends. `binary()` is where
it is, or None (`scripts/test` installs Debian's package when it is missing).

Promises: listens on 127.0.0.1 only; `start()` returns once `/-/ready` answers 200;
failures raise `ServerError` with the log's tail.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from types import TracebackType

import yaml

from tests.infra.servers import LOOPBACK, ServerError, free_port


def binary() -> str | None:
    return shutil.which("prometheus") or (
        "/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None
    )


class PrometheusServer:
    def __init__(self, directory: Path, *, targets: list[str], interval: float = 1.0) -> None:
        self.directory, self.targets, self.interval = directory, targets, interval
        self.port = free_port()
        self.url = f"http://{LOOPBACK}:{self.port}"
        self.log = directory / "prometheus.log"
        self._process: subprocess.Popen[bytes] | None = None

    def _config(self) -> Path:
        seconds = f"{self.interval:g}s"
        config = {
            "global": {"scrape_interval": seconds, "evaluation_interval": seconds},
            "scrape_configs": [
                {
                    "job_name": "dcgm-exporter",
                    "http_sd_configs": [
                        {"url": url, "refresh_interval": seconds} for url in self.targets
                    ],
                }
            ],
        }
        path = self.directory / "prometheus.yml"
        path.write_text(yaml.safe_dump(config))
        return path

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def start(self, timeout: float = 30.0) -> None:
        path = binary()
        if path is None:
            raise ServerError("prometheus is not installed (scripts/test installs it)")
        command = [
            path,
            f"--config.file={self._config()}",
            f"--storage.tsdb.path={self.directory / 'data'}",
            f"--web.listen-address={LOOPBACK}:{self.port}",
            "--web.enable-lifecycle",
            "--log.level=warn",
        ]
        with self.log.open("wb") as log:
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while not self._ready():
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])
                raise ServerError(f"prometheus did not start:\n{tail}")
            time.sleep(0.1)

    def stop(self, timeout: float = 20.0) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout)

    def __enter__(self) -> PrometheusServer:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
