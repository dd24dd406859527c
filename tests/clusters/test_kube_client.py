"""kubernetes_asyncio without its generated API and models: a sync through the real client loads
none of them, and every name the client offers is still there when asked for later, in any
order (each case in a fresh interpreter: this test process has the client imported in full)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(code: str) -> dict:
    """Run `code` in a fresh interpreter; it prints one JSON object, returned here."""
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


SYNC = """
import asyncio, json, sys, tempfile
from pathlib import Path

from dra_mirror.service.reactor.reactor import ReactorSettings, run_reactors
from dra_mirror.service.sim.run import ClusterSpec
from dra_mirror.service.stores.memory import MemoryStore
from tests.clusters.conftest import FAST
from tests.clusters.world import serving, small_world


def generated():
    prefixes = ("kubernetes_asyncio.client.models.", "kubernetes_asyncio.client.api.")
    return sorted(name for name in sys.modules if name.startswith(prefixes))


async def main(after):
    store = MemoryStore()
    settings = ReactorSettings(watch=FAST, status_interval=0.05)
    with tempfile.TemporaryDirectory() as tmp:
        spec = ClusterSpec(small_world("east", nodes=2))
        async with serving(Path(tmp), spec) as (_, connections):
            reactors = await run_reactors(
                connections, open_index=store.open_index, sinks=[store], status_sink=store,
                settings=settings, tune_gc=False,
            )
            async with reactors:
                await reactors.wait_synced()
            synced = {
                "generated": generated(),
                "pods": len(await store.list("Pod", cluster="east")),
                "modules": sum(n.startswith("kubernetes_asyncio") for n in sys.modules),
            }
            print(json.dumps(await after(connections[0].api_client, synced)))
"""


def test_a_sync_through_the_real_client_loads_no_generated_api_or_model():
    after = """
async def after(api_client, synced):
    return synced

asyncio.run(main(after))
"""
    result = run(SYNC + after)
    assert result["pods"] > 0
    assert result["generated"] == []
    assert result["modules"] < 40  # of ~860 when the client's packages import everything


def test_the_generated_api_and_models_still_load_when_asked_for_after_a_sync():
    after = """
async def after(api_client, synced):
    from kubernetes_asyncio import client
    from kubernetes_asyncio.client import V1Pod
    import kubernetes_asyncio
    nodes = await client.CoreV1Api(api_client).list_node()
    return {
        "generated_before": synced["generated"],
        "v1_pod": "kubernetes_asyncio.client.models.v1_pod" in sys.modules,
        "pod": V1Pod(metadata=client.V1ObjectMeta(name="p")).metadata.name,
        "nodes": type(nodes).__name__,
        "node": type(nodes.items[0]).__name__,
        "same": kubernetes_asyncio.client.models.V1Node is type(nodes.items[0]),
        "version": kubernetes_asyncio.__version__,
        "all": "V1Pod" in client.__all__,
    }

asyncio.run(main(after))
"""
    result = run(SYNC + after)
    assert result == {
        "generated_before": [],
        "v1_pod": True,
        "pod": "p",
        "nodes": "V1NodeList",  # ApiClient.deserialize found the model on the models package
        "node": "V1Node",
        "same": True,
        "version": result["version"],
        "all": True,
    }
    assert result["version"]


def test_names_of_the_deferred_packages_are_the_real_ones():
    result = run(
        """
        import json, sys
        from dra_mirror.service.clusters import kube_client
        import kubernetes_asyncio.client as client
        probes = [hasattr(client, '__wrapped__'), hasattr(client.models, '__warningregistry__')]
        light = 'kubernetes_asyncio.client.api' not in sys.modules
        from kubernetes_asyncio.client import ApiException
        from kubernetes_asyncio.client.api_client import ApiClient
        from kubernetes_asyncio.client.exceptions import ApiException as Raised
        from kubernetes_asyncio import watch
        still_light = 'kubernetes_asyncio.client.api' not in sys.modules
        kube_client.defer_generated_code()  # again: nothing changes
        from kubernetes_asyncio.client import CoreV1Api
        print(json.dumps({
            'probes': probes, 'light': [light, still_light],
            'same': [ApiClient is kube_client.ApiClient, ApiException is Raised,
                     client.ApiClient is ApiClient, CoreV1Api.__module__],
            'spec': [client.__spec__.name, client.__path__ == list(client.__spec__.submodule_search_locations)],
            'watch': watch.Watch.__name__,
        }))
        """
    )
    assert result == {
        "probes": [False, False],
        "light": [True, True],
        "same": [True, True, True, "kubernetes_asyncio.client.api.core_v1_api"],
        "spec": ["kubernetes_asyncio.client", True],
        "watch": "Watch",
    }


def test_nothing_is_deferred_when_the_client_was_imported_in_full():
    result = run(
        """
        import json, sys
        import kubernetes_asyncio.client
        from dra_mirror.service.clusters import kube_client
        print(json.dumps({
            'models': 'kubernetes_asyncio.client.models.v1_pod' in sys.modules,
            'hook': '__getattr__' in vars(kubernetes_asyncio.client),
            'same': kube_client.ApiClient is kubernetes_asyncio.client.ApiClient,
        }))
        """
    )
    assert result == {"models": True, "hook": False, "same": True}


def test_the_mirror_s_client_has_the_attributes_the_client_s_own_has() -> None:
    # MirrorApiClient and MirrorRest set what ApiClient and RESTClientObject's own __init__
    # set (they skip them only to build no TLS context for a plain http:// server).
    import asyncio

    from dra_mirror.service.clusters.kube_client import ApiClient, Configuration
    from dra_mirror.service.clusters.transport import api_client_for

    async def both() -> tuple[ApiClient, ApiClient]:
        configuration = Configuration(host="http://127.0.0.1:1")
        own, mirror = ApiClient(configuration), api_client_for(configuration)
        await own.close()
        await mirror.close()
        return own, mirror

    own, mirror = asyncio.run(both())
    assert sorted(vars(mirror)) == sorted(vars(own))
    assert sorted(vars(mirror.rest_client)) == sorted(vars(own.rest_client))
    assert mirror.default_headers == own.default_headers
    assert mirror.rest_client.pool_manager.trust_env is False
