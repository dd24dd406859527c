"""Running simulated clusters: one uvicorn server per cluster inside the running event loop.

    async with Simulator([ClusterSpec(store, versions=("v1",))], kubeconfig_path=path) as sim:
        sim.url("demo")          # http://127.0.0.1:<port>
        sim.clusters["demo"]     # the ClusterStore, for the world half and tests
        sim.served["demo"].apply_faults({"expireWatches": 1})

Promises: every listening socket is bound on 127.0.0.1 unless `host` says otherwise (port 0
= a free port, the real port is known at once); the kubeconfig (one context per cluster) is written atomically after the
servers accept connections and before `start()` returns; `stop()` ends open watch streams
and waits for the servers to exit. `serve_forever()` is the CLI's loop: it prints where
each cluster listens and runs until cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn

from dra_mirror.service.model.kinds import BY_PLURAL, DRA_VERSIONS
from dra_mirror.service.sim.kubeconfig import write_kubeconfig
from dra_mirror.service.sim.rbac import Access
from dra_mirror.service.sim.served import ServedCluster
from dra_mirror.service.sim.server import build_app
from dra_mirror.service.sim.store import ClusterStore

HOST = "127.0.0.1"


@dataclass
class ClusterSpec:
    """One cluster to serve: its store, the resource.k8s.io versions, initial faults."""

    store: ClusterStore
    versions: Sequence[str] = DRA_VERSIONS
    faults: dict[str, Any] = field(default_factory=dict)
    port: int = 0  # 0 = a free port
    access: Access | None = None  # bearer tokens and RBAC (rbac.py); None: none configured
    kubernetes: int | None = None  # the Kubernetes minor: which versions optional kinds have
    # optional kind -> the versions of it served (a kind not named: those of `kubernetes`)
    optional_versions: Mapping[str, Sequence[str]] = field(default_factory=dict)


def _spec(item: ClusterSpec | tuple | ClusterStore) -> ClusterSpec:
    if isinstance(item, ClusterSpec):
        return item
    if isinstance(item, ClusterStore):
        return ClusterSpec(item)
    return ClusterSpec(*item)


def _bind(host: str, port: int) -> socket.socket:
    # proto must be IPPROTO_TCP: asyncio sets TCP_NODELAY on accepted connections only then.
    # Without it, Nagle + delayed ACK cost ~40 ms per keep-alive request.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(512)
    sock.setblocking(False)
    return sock


class Simulator:
    """Serves several simulated clusters, one loopback port each."""

    def __init__(
        self,
        clusters: Iterable[ClusterSpec | tuple | ClusterStore],
        *,
        kubeconfig_path: str | Path | None = None,
        port_base: int | None = None,
        host: str = HOST,
        bookmark_interval: float = 60.0,
        default_watch_timeout: float = 1800.0,
        warm_list_cache: bool = True,
    ) -> None:
        self._specs = [_spec(c) for c in clusters]
        names = [s.store.name for s in self._specs]
        if len(set(names)) != len(names):
            raise ValueError(f"cluster names must be unique: {names}")
        self.kubeconfig_path = Path(kubeconfig_path) if kubeconfig_path else None
        self._port_base = port_base
        # 127.0.0.1 by default. Another address is for containers (docker-compose), where
        # the kubeconfig then names that address (or 127.0.0.1 for a wildcard).
        self.host = host
        self._address = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
        self.served: dict[str, ServedCluster] = {}
        for spec in self._specs:
            served = ServedCluster(
                spec.store,
                tuple(spec.versions),
                kubernetes=spec.kubernetes,
                optional_versions={k: tuple(v) for k, v in spec.optional_versions.items()},
                bookmark_interval=bookmark_interval,
                default_watch_timeout=default_watch_timeout,
            )
            if spec.faults:
                served.apply_faults(dict(spec.faults))
            if spec.access is not None:
                served.access = spec.access
            self.served[spec.store.name] = served
        self._servers: list[uvicorn.Server] = []
        self._tasks: list[asyncio.Task] = []
        self._tasks_aux: list[asyncio.Task] = []
        self._warm = warm_list_cache

    @property
    def clusters(self) -> dict[str, ClusterStore]:
        return {name: s.store for name, s in self.served.items()}

    @property
    def ports(self) -> dict[str, int]:
        return {name: s.port for name, s in self.served.items()}

    @property
    def tokens(self) -> dict[str, str]:
        """The bearer token each cluster's kubeconfig user carries (clusters with one)."""
        return {
            name: s.access.kubeconfig_token
            for name, s in self.served.items()
            if s.access.kubeconfig_token
        }

    def url(self, name: str) -> str:
        return f"http://{self._address}:{self.served[name].port}"

    async def start(self) -> None:
        for i, spec in enumerate(self._specs):
            served = self.served[spec.store.name]
            port = spec.port or (self._port_base + i if self._port_base else 0)
            sock = _bind(self.host, port)
            served.port = sock.getsockname()[1]
            config = uvicorn.Config(
                build_app(served),
                log_level="warning",
                access_log=False,
                lifespan="off",
                timeout_graceful_shutdown=2,
                timeout_keep_alive=30,
            )
            server = _EmbeddedServer(config)
            self._servers.append(server)
            self._tasks.append(
                asyncio.create_task(server.serve(sockets=[sock]), name=f"sim-{spec.store.name}")
            )
        while not all(s.started for s in self._servers):
            failed = [t for t in self._tasks if t.done()]
            if failed:
                await failed[0]  # raises the server's startup error
                raise RuntimeError("a simulated cluster's server stopped during startup")
            await asyncio.sleep(0.01)
        if self.kubeconfig_path is not None:
            write_kubeconfig(
                self.kubeconfig_path, self.ports, host=self._address, tokens=self.tokens
            )
        if self._warm:
            self._tasks_aux.append(asyncio.create_task(self._warm_list_cache(), name="sim-warm"))

    async def _warm_list_cache(self) -> None:
        """Encode every object's LIST form ahead of the first LIST, a few hundred at a time
        between requests: the first full list of a 90,000-object cluster then costs what a
        later one does (about a third of the cold time)."""
        for served in self.served.values():
            store = served.store
            for plural in BY_PLURAL:
                for i, key in enumerate(list(store.sorted_keys(plural))):
                    if store.stored(plural, key) is not None:
                        store.encoded(plural, key)
                    if i % 256 == 255:
                        await asyncio.sleep(0)

    async def stop(self) -> None:
        for task in self._tasks_aux:
            task.cancel()
        await asyncio.gather(*self._tasks_aux, return_exceptions=True)
        self._tasks_aux.clear()
        for served in self.served.values():
            served.close()
        for server in self._servers:
            server.should_exit = True
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self._servers.clear()
        self._tasks.clear()

    async def __aenter__(self) -> Simulator:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


class _EmbeddedServer(uvicorn.Server):
    """A cluster's server leaves SIGINT/SIGTERM to whoever owns the process.

    uvicorn installs its own handlers for the duration of `serve()` (the last server started
    wins them). Inside `dra-mirror demo` that would let SIGTERM stop the simulated clusters
    before the mirror, whose watchers would then log errors during their orderly shutdown;
    standalone (`dra-mirror sim`) the CLI's handler cancels `serve_forever`, whose clean-up
    stops the servers."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:  # uvicorn.Server's hook, overridden: no handlers
        yield


async def serve_forever(
    clusters: Iterable[ClusterSpec | tuple | ClusterStore],
    *,
    kubeconfig_path: str | Path = "sim.kubeconfig",
    port_base: int | None = None,
    host: str = HOST,
    announce: Callable[[str], None] = print,
) -> None:
    """Serve until cancelled (Ctrl-C); announce each cluster's address and the kubeconfig."""
    async with Simulator(
        clusters, kubeconfig_path=kubeconfig_path, port_base=port_base, host=host
    ) as sim:
        for name in sim.served:
            announce(f"cluster {name} listening on {sim.url(name)}")
        announce(f"kubeconfig written to {sim.kubeconfig_path} (contexts: {', '.join(sim.served)})")
        await asyncio.Event().wait()
