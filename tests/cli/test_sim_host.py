"""`dra-mirror sim --host ADDRESS` listens there (docker-compose runs it with --host=0.0.0.0 so
the mirror's container can reach it); the kubeconfig it writes names that address."""

from __future__ import annotations

import asyncio
import re
import signal
import sys
from pathlib import Path

import httpx
import yaml

DRA_MIRROR = Path(sys.executable).with_name("dra-mirror")
PATIENCE = 60.0  # seconds before a hung process fails the test (not a speed check)
LISTENING = re.compile(r"cluster (\S+) listening on (http://\S+)")


async def test_sim_listens_on_the_host_asked(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "sim.kubeconfig"
    process = await asyncio.create_subprocess_exec(
        str(DRA_MIRROR),
        *("sim", "--scenario", "demo", "--host", "127.0.0.2"),
        *("--kubeconfig-out", str(kubeconfig)),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert process.stdout is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(PATIENCE):
            while not any(line.startswith("kubeconfig written") for line in lines):
                line = (await process.stdout.readline()).decode()
                assert line, "dra-mirror sim exited early:\n" + "".join(lines)
                lines.append(line)
        urls = dict(m.groups() for m in map(LISTENING.match, lines) if m)
        assert set(urls) == {"east", "west"}
        assert all(url.startswith("http://127.0.0.2:") for url in urls.values()), urls
        servers = {
            c["name"]: c["cluster"]["server"]
            for c in yaml.safe_load(kubeconfig.read_text())["clusters"]
        }
        assert servers == urls
        async with httpx.AsyncClient() as http:
            response = await http.get(f"{urls['east']}/version")
        assert response.status_code == 200
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(PATIENCE):
            await process.communicate()
    assert process.returncode == 0


async def test_sim_on_a_busy_port_says_so(tmp_path: Path) -> None:
    """`--port-base` on a port another process holds: exit 1, the cluster and the address
    named, no traceback; nothing written."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = await asyncio.create_subprocess_exec(
            str(DRA_MIRROR),
            *("sim", "--scenario", "demo", "--port-base", str(port)),
            *("--kubeconfig-out", str(tmp_path / "sim.kubeconfig")),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        async with asyncio.timeout(PATIENCE):
            out, _ = await process.communicate()
    text = out.decode()
    assert process.returncode == 1, text
    assert f"cluster east: cannot listen on 127.0.0.1:{port}" in text, text
    assert "--port-base" in text and "Traceback" not in text, text
    assert not (tmp_path / "sim.kubeconfig").exists()
