"""What bench/abuse.py probes: the simulator and `dra-mirror serve` with real credentials.

`AbuseStack(run_dir)` writes, under `run_dir`:

* a scenario: the shipped `access` scenario (tokens, RBAC, TokenReview on `east`) with east
  grown by 130 nodes of 8 GPUs (1,048 devices: pages of `devices(first: 1000)` are full);
* an access file: static tokens (`admin`), OIDC with an RSA key made here (`jwksFile`,
  `clockSkew: 0`, group `admins` → admin), Kubernetes TokenReview on east;

and starts, as child processes, `dra-mirror sim` and `dra-mirror serve` (the API under test,
its file descriptors capped at `NOFILE` so that a flood of connections can exhaust them), and
on demand `dra-mirror serve --insecure-no-auth`. `oidc_token(seconds)` mints a token that
expires then; `rss_mb()` reads the API's resident memory; `sim_requests()` counts the requests
east's API server answered (TokenReviews among them). Not a benchmark.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import resource
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import jwt
import yaml
from cryptography.hazmat.primitives.asymmetric import rsa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.redis_common import free_port  # noqa: E402

NOFILE = 4096  # the API's file descriptor limit during the probes
ISSUER = "https://issuer.abuse.test"


def scenario() -> dict[str, Any]:
    base = yaml.safe_load((ROOT / "service/sim/scenarios/access.yaml").read_text())
    east = base["clusters"][0]
    east["nodes"].append({"name": "east-h-{i}", "count": 130,
                          "devices": [{"profile": "nvidia-a100-80gb-pcie", "count": 8}]})  # fmt: skip
    return base


def _limit_fds() -> None:  # in the child, before exec
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(NOFILE, hard), hard))


class AbuseStack:
    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.kubeconfig = run_dir / "sim.kubeconfig"
        self.port = free_port()
        self.admin_token = secrets.token_hex(32)
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.processes: dict[str, subprocess.Popen] = {}
        self.url = f"http://127.0.0.1:{self.port}"

    # --- files ---------------------------------------------------------------------------

    def write_files(self) -> None:
        (self.run_dir / "scenario.yaml").write_text(yaml.safe_dump(scenario()))
        digest = hashlib.sha256(self.admin_token.encode()).hexdigest()
        tokens = {"tokens": [{"name": "admin", "sha256": digest, "scope": {"admin": True}}]}
        (self.run_dir / "tokens.yaml").write_text(yaml.safe_dump(tokens))
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        jwk.update(kid="abuse", use="sig", alg="RS256")
        (self.run_dir / "jwks.json").write_text(json.dumps({"keys": [jwk]}))
        access = {
            "staticTokens": str(self.run_dir / "tokens.yaml"),
            "oidc": {"issuer": ISSUER, "audience": "dra-mirror", "clockSkew": 0,
                     "jwksFile": str(self.run_dir / "jwks.json"),
                     "groups": {"admins": {"admin": True}}},
            "kubernetes": {"context": "east", "clusters": ["east", "west"]},
        }  # fmt: skip
        self.access_file = self.run_dir / "access.yaml"
        self.access_file.write_text(yaml.safe_dump(access))

    def oidc_token(self, seconds: float) -> str:
        now = int(time.time())
        claims = {"iss": ISSUER, "aud": "dra-mirror", "sub": "probe", "email": "probe@abuse.test",
                  "groups": ["admins"], "iat": now, "exp": now + seconds}  # fmt: skip
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": "abuse"})

    # --- processes -----------------------------------------------------------------------

    def spawn(
        self, name: str, args: list[str], env: dict[str, str] | None = None, *, fds: bool = False
    ) -> subprocess.Popen:
        log = (self.run_dir / f"{name}.log").open("ab")
        process = subprocess.Popen(
            [sys.executable, "-m", "dra_mirror.service.cli", *args],
            cwd=ROOT, env={**os.environ, "DRA_MIRROR_LOG_LEVEL": "WARNING", **(env or {})},
            stdout=log, stderr=subprocess.STDOUT, preexec_fn=_limit_fds if fds else None,
        )  # fmt: skip
        self.processes[name] = process
        return process

    async def start(self) -> None:
        self.write_files()
        self.spawn("sim", ["sim", "--scenario", str(self.run_dir / "scenario.yaml"),
                           "--kubeconfig-out", str(self.kubeconfig)])  # fmt: skip
        for _ in range(600):
            if self.kubeconfig.exists():
                break
            await asyncio.sleep(0.1)
        await self.restart_api()

    async def restart_api(self) -> None:
        """Start the API under test again (a probe killed it)."""
        self.spawn("api", ["serve", "--kubeconfig", str(self.kubeconfig), "--port", str(self.port)],
                   {"DRA_MIRROR_ACCESS_CONFIG": str(self.access_file)}, fds=True)  # fmt: skip
        await self.ready(self.url)

    async def ready(self, url: str, within: float = 120.0) -> None:
        async with httpx.AsyncClient(timeout=5) as http:
            deadline = time.monotonic() + within
            while time.monotonic() < deadline:
                for process in self.processes.values():
                    if process.poll() is not None:
                        raise RuntimeError(f"{process.args} exited with {process.returncode}")
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get(f"{url}/readyz")).status_code == 200:
                        return
                await asyncio.sleep(0.3)
        raise RuntimeError(f"{url} not ready within {within:.0f}s")

    async def start_open(self) -> str:
        """`serve --insecure-no-auth` beside the API under test; its URL."""
        port = free_port()
        self.spawn("open", ["serve", "--kubeconfig", str(self.kubeconfig), "--port", str(port),
                            "--insecure-no-auth"])  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        await self.ready(url)
        return url

    def rss_mb(self, name: str = "api") -> float:
        status = Path(f"/proc/{self.processes[name].pid}/status").read_text()
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def alive(self, name: str = "api") -> bool:
        return self.processes[name].poll() is None

    def sim_requests(self) -> int:
        config = yaml.safe_load(self.kubeconfig.read_text())
        cluster = next(c for c in config["clusters"] if c["name"] == "east")["cluster"]
        user = next(u for u in config["users"] if u["name"] == "east")["user"]
        answer = httpx.get(f"{cluster['server']}/sim/status",
                           headers={"Authorization": f"Bearer {user['token']}"}, timeout=5)  # fmt: skip
        return int(answer.json()["requests"])

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
