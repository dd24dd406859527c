"""End to end on the demo: the simulator's clusters watched by the mirror under uvicorn, the
alert engine beside its reactors posting to a fake Slack Web API on loopback; a claim deleted
through the simulator's API resolves its alert (message updated, a reply in its thread)."""

from __future__ import annotations

import asyncio

import httpx
import uvicorn
import yaml

from dra_mirror.service.alerts.config import parse
from dra_mirror.service.runtime.demo import demo_app
from dra_mirror.service.settings import Settings
from tests.alerts.conftest import FakeSlack
from tests.app.test_smoke import free_socket


async def _until(predicate, what: str, seconds: float = 30) -> None:
    for _ in range(int(seconds / 0.05)):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


async def test_an_idle_claim_alerts_in_slack_and_resolves_when_deleted(
    tmp_path, fake_slack: FakeSlack
) -> None:
    sock = free_socket()
    port = sock.getsockname()[1]
    alerts = parse(
        {"interval": 1, "webUrl": f"http://127.0.0.1:{port}", "rules": {"idle-holder": {}},
         "slack": {"apiUrl": f"{fake_slack.url}api/", "channel": "#gpu-alerts"}},
        environ={"DRA_MIRROR_SLACK_BOT_TOKEN": "xoxb-test"},
    )  # fmt: skip
    demo = demo_app(Settings(), workdir=tmp_path, alerts=alerts)
    server = uvicorn.Server(uvicorn.Config(demo.app, log_config=None, lifespan="on"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))

    def posted(method: str, needle: str) -> list[dict]:
        return [b for m, b in fake_slack.calls if m == method and needle in str(b)]

    try:
        await _until(lambda: posted("chat.postMessage", "research/notebook-gpu"), "the alert")
        [post] = posted("chat.postMessage", "research/notebook-gpu")
        assert post["channel"] == "#gpu-alerts"
        button = next(b for b in post["blocks"] if b["type"] == "actions")["elements"][0]
        assert button["url"] == (
            f"http://127.0.0.1:{port}/ui/claim?cluster=east&namespace=research&name=notebook-gpu"
        )
        await asyncio.sleep(1.5)  # more evaluations: still one message
        assert len(posted("chat.postMessage", "research/notebook-gpu")) == 1
        config = yaml.safe_load(demo.kubeconfig.read_text())
        east = next(c["cluster"]["server"] for c in config["clusters"] if c["name"] == "east")
        async with httpx.AsyncClient(timeout=10) as http:
            deleted = await http.delete(
                f"{east}/apis/resource.k8s.io/v1/namespaces/research/resourceclaims/notebook-gpu"
            )
            assert deleted.status_code == 200
        await _until(lambda: posted("chat.update", "notebook-gpu"), "the resolved update")
        [update] = posted("chat.update", "notebook-gpu")
        assert update["blocks"][0]["text"]["text"].startswith("[RESOLVED]")
        await _until(
            lambda: any(b.get("thread_ts") == update["ts"] for _, b in fake_slack.calls),
            "the reply in the thread",
        )
        [reply] = [b for _, b in fake_slack.calls if b.get("thread_ts") == update["ts"]]
        assert reply["text"].startswith("Resolved: research/notebook-gpu in east")
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 30)
        sock.close()
