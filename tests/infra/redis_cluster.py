"""A private Redis Cluster on loopback: three masters with one replica each.

Six of Debian's ``redis-server`` processes in cluster mode at free ports, under one
directory, joined by ``redis-cli --cluster create … --cluster-replicas 1 --cluster-yes``.
Used by ``tests.infra.stack`` (``up --redis-cluster`` starts it with the other servers) and
by the ``redis_cluster`` fixture of ``tests/conftest.py``, which starts one lazily, the first
time a test asks for it, so a run that needs no cluster pays nothing.

Promises:

* ``start()`` returns once every node answers, all 16384 slots are served and every node
  reports ``cluster_state:ok``; ``stop()`` returns once no node accepts connections.
* ``kill_master(key=…)`` kills (SIGKILL, as a crash) the master serving that key's slot and
  returns once its replica has been promoted and the cluster is ``ok`` again, with the time
  that took; ``restart(node)`` brings a killed node back (it rejoins as a replica of the
  node that replaced it).
* Nodes save no snapshots and keep no AOF; each keeps its cluster configuration
  (``nodes-<port>.conf``) and, as a replica, the copy its master sent it
  (``dump-<port>.rdb``); a fresh ``start()`` removes both. ``cluster-node-timeout`` is one
  second unless asked otherwise (``node_timeout_ms``), so a failover takes a few seconds.
* Every failure raises ``ServerError`` with the failing node's log tail.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

from tests.infra.servers import LOOPBACK, ServerError, _tail, _wait, accepts_connections, free_port

NODES = 6  # three masters, one replica each
NODE_TIMEOUT_MS = 1000


def command(port: int, *args: str, timeout: float = 2.0) -> str:
    """One command to one node, its reply unparsed, as text (bulk and status replies)."""
    connection = redis.Connection(host=LOOPBACK, port=port, socket_timeout=timeout,
                                  socket_connect_timeout=timeout)  # fmt: skip
    try:
        connection.send_command(*args)
        reply = connection.read_response()
    except redis.ResponseError as error:
        raise ServerError(f"redis error from {port}: {error}") from error
    except redis.ConnectionError as error:
        raise OSError(str(error)) from error
    finally:
        connection.disconnect()
    return reply.decode(errors="replace") if isinstance(reply, bytes) else str(reply)


@dataclass
class ClusterNode:
    binary: Path
    port: int
    workdir: Path
    node_timeout_ms: int = NODE_TIMEOUT_MS

    @property
    def log(self) -> Path:
        return self.workdir / f"redis-{self.port}.log"

    @property
    def config(self) -> Path:
        return self.workdir / f"nodes-{self.port}.conf"

    @property
    def dump(self) -> Path:
        """Where a replica keeps the copy a full sync sent it (one file per node: nodes
        share the directory, and a node loads its file when it starts)."""
        return self.workdir / f"dump-{self.port}.rdb"

    @property
    def pidfile(self) -> Path:
        return self.workdir / f"redis-{self.port}.pid"

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        if accepts_connections(self.port):
            raise ServerError(f"port {self.port} is taken: cannot start a cluster node there")
        argv = [
            str(self.binary),
            "--bind", LOOPBACK,
            "--port", str(self.port),
            "--cluster-enabled", "yes",
            "--cluster-config-file", str(self.config),
            "--cluster-node-timeout", str(self.node_timeout_ms),
            "--save", "",
            "--appendonly", "no",
            # a replica's first sync without the 5 s wait for more replicas: a replica that
            # never synced cannot be promoted
            "--repl-diskless-sync-delay", "0",
            "--dir", str(self.workdir),
            "--dbfilename", self.dump.name,
            "--daemonize", "yes",
            "--pidfile", str(self.pidfile),
            "--logfile", str(self.log),
        ]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise ServerError(f"redis-server (cluster node {self.port}) failed: "
                              f"{done.stderr or done.stdout}{_tail(self.log)}")  # fmt: skip
        _wait(self.answers, timeout=20, what=f"cluster node {self.port}", log=self.log)

    def answers(self) -> bool:
        try:  # a node busy on a loaded machine may take a while: 0.5 s counted live nodes dead
            return command(self.port, "PING", timeout=5.0) == "PONG"
        except (OSError, ServerError):
            return False

    def running(self) -> bool:
        """Its process is alive (a killed node's pidfile is gone): a slow answer is no death."""
        try:
            os.kill(int(self.pidfile.read_text().strip()), 0)
        except (OSError, ValueError):
            return False
        return True

    def synced(self) -> bool:
        """A master, or a replica whose link to its master is up (it has the data)."""
        replication = self.info("replication")
        return replication.get("role") == "master" or (
            replication.get("master_link_status") == "up"
        )

    def kill(self) -> None:
        """SIGKILL, as a crash: the node gets no chance to hand anything over."""
        try:
            pid = int(self.pidfile.read_text().strip())
            os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError):
            pass
        _wait(lambda: not accepts_connections(self.port), timeout=10,
              what=f"cluster node {self.port} to die", log=self.log)  # fmt: skip
        self.pidfile.unlink(missing_ok=True)

    def stop(self) -> None:
        try:
            command(self.port, "SHUTDOWN", "NOSAVE", timeout=2)
        except (OSError, ServerError):
            pass
        _wait(lambda: not accepts_connections(self.port), timeout=20,
              what=f"cluster node {self.port} to stop", log=self.log)  # fmt: skip

    def info(self, section: str) -> dict[str, str]:
        text = (
            command(self.port, "INFO", section)
            if section != "cluster"
            else command(self.port, "CLUSTER", "INFO")
        )
        pairs = (line.split(":", 1) for line in text.splitlines() if ":" in line)
        return {key.strip(): value.strip() for key, value in pairs}


@dataclass
class RedisCluster:
    """Six nodes under ``workdir``; ``ports`` chosen at construction unless given."""

    binary: Path
    workdir: Path
    ports: list[int] = field(default_factory=list)
    # how long a master may not answer before its replica is promoted: 1 s makes the tests'
    # failovers quick; a bench writing large batches on a busy machine wants more (a master
    # busy with one for over a second is taken for dead)
    node_timeout_ms: int = NODE_TIMEOUT_MS

    def __post_init__(self) -> None:
        if not self.ports:
            self.ports = _distinct_free_ports(NODES)
        self.nodes = [ClusterNode(self.binary, port, self.workdir, self.node_timeout_ms)
                      for port in self.ports]  # fmt: skip

    @property
    def url(self) -> str:
        """A seed node in the ``redis+cluster://`` form dra-mirror reads as a cluster."""
        return f"redis+cluster://{LOOPBACK}:{self.ports[0]}/0"

    @property
    def seeds(self) -> list[tuple[str, int]]:
        return [(LOOPBACK, port) for port in self.ports]

    def start(self, timeout: float = 60.0) -> None:
        """Start a fresh cluster (any configuration its ports left in ``workdir`` is removed)."""
        try:
            for node in self.nodes:
                node.config.unlink(missing_ok=True)
                node.dump.unlink(missing_ok=True)
                node.start()
            create = ["redis-cli", "--cluster", "create",
                      *(f"{LOOPBACK}:{port}" for port in self.ports),
                      "--cluster-replicas", "1", "--cluster-yes"]  # fmt: skip
            done = subprocess.run(create, capture_output=True, text=True, check=False,
                                  timeout=timeout)  # fmt: skip
            if done.returncode != 0:
                raise ServerError(f"redis-cli --cluster create failed: {done.stdout}{done.stderr}")
            self.wait_ok(timeout)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for node in self.nodes:
            if accepts_connections(node.port):
                node.stop()

    def live(self) -> list[ClusterNode]:
        return [node for node in self.nodes if node.answers()]

    def wait_ok(self, timeout: float = 60.0) -> None:
        """Until every live node says ``cluster_state:ok`` with all slots served, and every
        slot's master is alive."""

        def ok() -> bool:
            try:
                nodes = self.live()
                return (
                    bool(nodes)
                    and all(
                        (info := node.info("cluster")).get("cluster_state") == "ok"
                        and info.get("cluster_slots_ok") == "16384"
                        for node in nodes
                    )
                    and len(self.masters()) == NODES // 2
                    and all(node.synced() for node in nodes)
                )
            except (OSError, ServerError):
                return False

        _wait(ok, timeout=timeout, what="the Redis Cluster to be ok",
              log=self.nodes[0].log)  # fmt: skip

    def masters(self) -> dict[int, list[tuple[int, int]]]:
        """Live masters by port -> the slot ranges they serve (from a live node's view)."""
        (node, *_) = self.live()
        masters: dict[int, list[tuple[int, int]]] = {}
        for line in command(node.port, "CLUSTER", "NODES").splitlines():
            parts = line.split()
            if len(parts) < 8 or "master" not in parts[2] or "fail" in parts[2]:
                continue
            port = int(parts[1].split("@")[0].rsplit(":", 1)[1])
            if not any(n.port == port and n.answers() for n in self.nodes):
                continue
            ranges = []
            for spec in parts[8:]:
                if spec.startswith("["):
                    continue  # a slot being migrated
                low, _, high = spec.partition("-")
                ranges.append((int(low), int(high or low)))
            if ranges:
                masters[port] = ranges
        return masters

    def master_of(self, slot: int) -> ClusterNode:
        for port, ranges in self.masters().items():
            if any(low <= slot <= high for low, high in ranges):
                return next(node for node in self.nodes if node.port == port)
        raise ServerError(f"no live master serves slot {slot}")

    def kill_master(self, *, slot: int, timeout: float = 30.0) -> tuple[ClusterNode, float]:
        """Kill the master of `slot`; return it and the seconds until a replica serves the
        slot as master and the cluster is ok again."""
        victim = self.master_of(slot)
        began = time.monotonic()
        victim.kill()

        def promoted() -> bool:
            try:
                return self.master_of(slot).port != victim.port
            except (OSError, ServerError):
                return False

        _wait(promoted, timeout=timeout, what=f"a replica to take over slot {slot}",
              log=victim.log)  # fmt: skip
        self.wait_ok(timeout)
        return victim, time.monotonic() - began

    def restart(self, node: ClusterNode, timeout: float = 60.0) -> None:
        """Start a killed node again: it rejoins (as a replica) from its nodes.conf."""
        node.start()

        def rejoined() -> bool:
            try:
                return node.info("replication").get("role") == "slave" and node.synced()
            except (OSError, ServerError):
                return False

        _wait(rejoined, timeout=timeout, what=f"node {node.port} to rejoin", log=node.log)
        self.wait_ok(timeout)

    def heal(self, timeout: float = 60.0) -> None:
        """Start every node whose process is gone (killed by a test) and wait until ok. A
        node that is only slow to answer (a loaded machine) is left running: starting it
        again would fail on its own port."""
        for node in self.nodes:
            if not node.running():
                self.restart(node, timeout)
        self.wait_ok(timeout)

    @classmethod
    def from_env(cls, env: os._Environ[str] | dict[str, str] = os.environ) -> RedisCluster | None:
        """The cluster ``stack up --redis-cluster`` described, or None."""
        ports = env.get("DRA_MIRROR_TEST_REDIS_CLUSTER_PORTS")
        workdir = env.get("DRA_MIRROR_TEST_REDIS_CLUSTER_DIR")
        binary = env.get("DRA_MIRROR_TEST_REDIS_SERVER")
        if not (ports and workdir and binary):
            return None
        timeout = int(env.get("DRA_MIRROR_TEST_REDIS_CLUSTER_NODE_TIMEOUT_MS") or NODE_TIMEOUT_MS)
        return cls(Path(binary), Path(workdir), [int(p) for p in ports.split(",")], timeout)

    @classmethod
    def found_in(cls, workdir: Path) -> RedisCluster | None:
        """The cluster whose nodes left their configuration in ``workdir``, or None."""
        ports = sorted(int(p.stem.split("-", 1)[1]) for p in workdir.glob("nodes-*.conf"))
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        return cls(Path(binary), workdir, ports) if ports else None

    def exports(self) -> dict[str, str]:
        return {
            "DRA_MIRROR_TEST_REDIS_CLUSTER_URL": self.url,
            "DRA_MIRROR_TEST_REDIS_CLUSTER_PORTS": ",".join(map(str, self.ports)),
            "DRA_MIRROR_TEST_REDIS_CLUSTER_DIR": str(self.workdir),
            "DRA_MIRROR_TEST_REDIS_CLUSTER_NODE_TIMEOUT_MS": str(self.node_timeout_ms),
        }


def _distinct_free_ports(count: int) -> list[int]:
    """Ports free now, distinct, each with its cluster bus port (+10000) free as well."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port in ports or port + 10000 > 65535 or accepts_connections(port + 10000):
            continue
        ports.append(port)
    return ports
