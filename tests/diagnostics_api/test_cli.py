"""`dra-mirror explain` and `dra-mirror lint` as a user runs them: the real console script in a
subprocess against the mirrored simulator's uvicorn (`--server`) or against the simulator's
kubeconfig (in-process mirroring), and `lint` offline on files and stdin. Answers are compared
with the graph's own answers over HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from click.testing import CliRunner

from dra_mirror.service.cli.diagnostics import render_diagnosis
from dra_mirror.service.cli.main import main
from tests.diagnostics_api.conftest import EXPLAIN, Mirrored, claim_named
from tests.diagnostics_api.test_lint_api import BAD

DRA_MIRROR = str(Path(sys.executable).with_name("dra-mirror"))


async def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRA_MIRROR_")} | (env or {})
    process = await asyncio.create_subprocess_exec(
        DRA_MIRROR,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_explain_against_a_server(mirrored: Mirrored) -> None:
    name = claim_named(mirrored.raw("manual", "resourceclaims"), "ops", "a100-")
    graph = (await mirrored.data(EXPLAIN, cluster="manual", namespace="ops", name=name))[
        "explainClaim"
    ]
    # Without --cluster the claim is looked up in every cluster (only `manual` has it).
    code, out, err = await run("explain", f"ops/{name}", "--server", mirrored.url, "--json")
    assert code == 0, err
    [answer] = json.loads(out)
    assert (answer["cluster"], answer["verdict"], answer["message"]) == (
        "manual",
        graph["verdict"],
        graph["message"],
    )
    code, out, err = await run(
        "explain", "ops/forgotten", "--server", mirrored.url, "--cluster", "manual"
    )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "ops/forgotten in manual (allocated): IDLE"
    assert lines[1] == "  allocated (gpu.nvidia.com/a100-0/gpu-0) but no consumer pod is Running"
    assert "  [x] allocated: 1 device(s)" in lines and "  [ ] running: no pod uses it" in lines


async def test_explain_an_unknown_claim_fails(mirrored: Mirrored) -> None:
    code, _, err = await run("explain", "ops/nope", "--server", mirrored.url)
    assert code == 1 and "no claim ops/nope in any mirrored cluster" in err
    code, _, err = await run("explain", "nope", "--server", mirrored.url)
    assert code == 2 and "NAMESPACE/CLAIM" in err


async def test_explain_in_process_against_a_kubeconfig(mirrored: Mirrored) -> None:
    name = claim_named(mirrored.raw("manual", "resourceclaims"), "ops", "second-")
    graph = (await mirrored.data(EXPLAIN, cluster="manual", namespace="ops", name=name))[
        "explainClaim"
    ]
    code, out, err = await run(
        "explain", f"ops/{name}", "--kubeconfig", str(mirrored.kubeconfig), "--context", "manual",
        "--json",
    )  # fmt: skip
    assert code == 0, err
    [answer] = json.loads(out)
    assert answer["verdict"] == graph["verdict"] == "SHARING_OFF"
    assert answer["message"] == graph["message"]
    assert answer["holders"] == [
        {k: v for k, v in h.items() if k != "resourceClaim"} for h in graph["holders"]
    ]


async def test_lint_against_a_server(mirrored: Mirrored, tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    code, out, err = await run(
        "lint", str(path), "--server", mirrored.url, "--cluster", "east", "--json"
    )
    assert code == 1, err  # error-severity findings
    rules = {f["rule"] for f in json.loads(out)}
    assert {"claim-other-namespace", "template-per-replica", "container-claim-unknown"} <= rules
    code, out, err = await run("lint", "--server", mirrored.url, "--cluster", "manual")
    assert code == 0, err
    assert "class-matches-nothing" in out and "DeviceClass gpu.amd.com" in out


async def test_lint_a_cluster_asks_the_local_mirror_by_default(mirrored: Mirrored) -> None:
    """`lint --cluster C` without --server asks $DRA_MIRROR_SERVER (else 127.0.0.1:8000), as
    the question commands do."""
    code, out, err = await run(
        "lint", "--cluster", "manual", env={"DRA_MIRROR_SERVER": mirrored.url}
    )
    assert code == 0, err
    assert "class-matches-nothing" in out


def test_explain_says_each_requests_verdict_once() -> None:
    request = {
        "request": "gpu", "verdict": "ALL_HELD", "summary": "every matching device is held",
        "deviceClassName": "gpu.nvidia.com", "classExists": True, "classDevices": 4,
        "selectors": [], "selectorErrors": [], "nodes": [], "freeOrShareable": 0, "needed": 1,
    }  # fmt: skip
    diagnosis = {
        "namespace": "ns", "name": "c", "cluster": "east", "state": "PENDING",
        "verdict": "ALL_HELD", "message": "request gpu: no devices left: every matching device "
        "is held by ns/a", "requests": [request], "holders": [], "checks": [],
        "nodesWithoutDriver": [], "pods": [],
    }  # fmt: skip
    lines = render_diagnosis(diagnosis).splitlines()
    assert lines[1].startswith("  request gpu: no devices left")
    assert lines[2] == "  request gpu: ALL_HELD"  # the headline said the rest
    other = {**diagnosis, "message": "2 requests cannot be met", "verdict": "MIXED"}
    assert "  request gpu: ALL_HELD — every matching device is held" in render_diagnosis(other)


def test_lint_offline(tmp_path: Path, shared_dir: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["lint", "-"], input=BAD)
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0].split() == ["error", "container-claim-unknown", "Pod", "default/careless",
                                "spec.containers[0].resources.claims[1]"]  # fmt: skip
    assert "claim-other-namespace" not in result.output  # needs a cluster's claims
    clean = shared_dir / "fixtures" / "upstream" / "nvidia-quickstart-v1-gpu-test4-mig.yaml"
    result = runner.invoke(main, ["lint", str(clean)])
    assert (result.exit_code, result.output) == (0, "no findings\n")
    result = runner.invoke(main, ["lint", "-"], input="kind: [")
    assert result.exit_code == 1 and "not YAML" in result.output
    deep = "kind: Pod\nspec:\n" + "".join("  " * i + "b:\n" for i in range(1, 5000))
    result = runner.invoke(main, ["lint", "-"], input=deep)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.exception
    assert "nested deeper than" in result.output or "nesting depth" in result.output
    result = runner.invoke(main, ["lint"])
    assert result.exit_code == 2


async def test_explain_with_the_nodes_the_pods_may_use(mirrored: Mirrored) -> None:
    [waiting] = [
        p["metadata"]["name"]
        for p in mirrored.raw("east", "pods")
        if p["metadata"]["namespace"] == "training" and p["status"].get("phase") == "Pending"
    ]
    name = claim_named(mirrored.raw("east", "resourceclaims"), "training", f"{waiting}-gpu-")
    # The trainer pods' nodeSelector pins them to east-h200-1: no --node needed, and naming
    # that node gives the same answer.
    for nodes in ((), ("--node", "east-h200-1")):
        code, out, err = await run(
            "explain", f"training/{name}", "--cluster", "east", *nodes, "--server", mirrored.url
        )
        assert code == 0, err
        lines = out.splitlines()
        assert lines[0] == f"training/{name} in east (pending): ALL_HELD"
        assert "    class gpu.nvidia.com covers 4 devices" in lines
        assert "    free or shareable: 0 (needs 1)" in lines
        assert any(line.startswith("    research/notebook-gpu  idle since ") for line in lines)
    # --node overrides what the pods say.
    code, out, err = await run(
        "explain", f"training/{name}", "--cluster", "east", "--node", "east-h200-0",
        "--server", mirrored.url,
    )  # fmt: skip
    assert code == 0, err
    assert out.splitlines()[0] == f"training/{name} in east (pending): ALLOCATABLE"
    assert "on node east-h200-0" in out


UNPLACEABLE = """apiVersion: v1
kind: Pod
metadata: {name: lost, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {claims: [{name: gpu}]}}]
  resourceClaims: [{name: gpu, resourceClaimName: no-such-claim}]
"""
PLACEABLE = """apiVersion: v1
kind: Pod
metadata: {name: plain, namespace: default}
spec:
  containers: [{name: c, image: x}]
"""


async def test_plan_fail_on_unplaceable_for_ci(mirrored: Mirrored, tmp_path: Path) -> None:
    for text, code_wanted in ((UNPLACEABLE, 1), (PLACEABLE, 0)):
        path = tmp_path / "manifests.yaml"
        path.write_text(text)
        args = ("plan", str(path), "--server", mirrored.url, "--cluster", "east")
        code, out, err = await run(*args)
        assert code == 0, err  # an answer, placeable or not
        code, out, err = await run(*args, "--fail-on", "unplaceable")
        assert code == code_wanted, out + err


def test_lint_offline_compiles_cel() -> None:
    broken = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, selectors: [{cel: {expression: "device.driver =="}}]}}]
"""
    result = CliRunner().invoke(main, ["lint", "-"], input=broken)
    assert result.exit_code == 1 and "cel-invalid" in result.output
