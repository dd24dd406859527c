"""Private redis-server and PostgreSQL instances for the test suite, on loopback only.

Controllers for the suite's servers, used by two callers:

* ``tests.infra.stack`` (run by ``scripts/test``) starts both servers at free ports under
  a temporary run directory and exports ``DRA_MIRROR_TEST_*`` variables describing them;
* ``tests/conftest.py`` rebuilds the same controllers from those ``DRA_MIRROR_TEST_*``
  variables (``from_env``) so that outage tests can ``stop()`` and ``start()`` a real
  server.

Promises: servers listen on 127.0.0.1 only; ``start()`` returns only once the server
accepts connections (for PostgreSQL: answers the startup handshake), ``stop()`` only
once the port refuses them; every failure raises ``ServerError`` with the server's log
tail. The suite's Redis runs without persistence (``--save ''``, no AOF), so a restarted
Redis is empty (a test may start one of its own with its append-only file on); PostgreSQL
keeps its data across a restart.
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

LOOPBACK = "127.0.0.1"
TEST_DATABASE = "dramirror_test"
# initdb and pg_ctl refuse to run as root: when we are root, this account owns the cluster.
FALLBACK_PG_USER = "dramirror"


class ServerError(RuntimeError):
    """A test server did not start, did not stop, or is not configured."""


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def accepts_connections(port: int, host: str = LOOPBACK) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _wait(predicate, *, timeout: float, what: str, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise ServerError(f"timed out after {timeout:.0f}s waiting for {what}{_tail(log)}")
        time.sleep(0.05)


def _tail(log: Path | None, lines: int = 20) -> str:
    if log is None or not log.exists():
        return ""
    text = log.read_text(errors="replace").splitlines()[-lines:]
    return f"\n--- {log} (last {len(text)} lines) ---\n" + "\n".join(text)


@dataclass
class RedisServer:
    """A private redis-server at ``port`` whose files live in ``workdir``: non-persistent, or
    with ``appendonly`` its append-only file on (``appendfsync everysec``, as production runs
    it), so that a restart — after ``kill()`` too — reloads what it held."""

    binary: Path
    port: int
    workdir: Path
    appendonly: bool = False

    @property
    def url(self) -> str:
        return f"redis://{LOOPBACK}:{self.port}/0"

    @property
    def log(self) -> Path:
        return self.workdir / "redis.log"

    def _ping(self) -> bool:
        # RESP inline command; a server still loading answers -LOADING instead of +PONG.
        try:
            with socket.create_connection((LOOPBACK, self.port), timeout=0.5) as conn:
                conn.sendall(b"PING\r\n")
                return conn.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def start(self, timeout: float = 20.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        # --save '': no snapshots; without the append-only file nothing is written to disk and
        # a restart starts empty, with it a restart reloads every write (as production runs).
        command = [
            str(self.binary),
            "--bind", LOOPBACK,
            "--port", str(self.port),
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", "everysec",
            "--dir", str(self.workdir),
            "--daemonize", "yes",
            "--pidfile", str(self.workdir / "redis.pid"),
            "--logfile", str(self.log),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise ServerError(f"redis-server failed: {done.stderr or done.stdout}{_tail(self.log)}")
        _wait(self._ping, timeout=timeout, what=f"redis on port {self.port}", log=self.log)

    def stop(self, timeout: float = 20.0) -> None:
        # SHUTDOWN NOSAVE closes the connection without a reply once the server exits.
        try:
            with socket.create_connection((LOOPBACK, self.port), timeout=2) as conn:
                conn.sendall(b"SHUTDOWN NOSAVE\r\n")
                conn.recv(64)
        except OSError:
            pass
        _wait(
            lambda: not accepts_connections(self.port),
            timeout=timeout,
            what=f"redis on port {self.port} to stop",
            log=self.log,
        )

    def kill(self, timeout: float = 20.0) -> None:
        """SIGKILL, as a crash: no shutdown, no save; returns once the port refuses."""
        pid = int((self.workdir / "redis.pid").read_text().strip())
        os.kill(pid, 9)
        _wait(
            lambda: not accepts_connections(self.port),
            timeout=timeout,
            what=f"redis on port {self.port} to die",
            log=self.log,
        )
        (self.workdir / "redis.pid").unlink(missing_ok=True)

    @classmethod
    def from_env(cls, env: os._Environ[str] | dict[str, str] = os.environ) -> RedisServer:
        binary = _required(env, "DRA_MIRROR_TEST_REDIS_SERVER")
        port = _required(env, "DRA_MIRROR_TEST_REDIS_PORT")
        workdir = env.get("DRA_MIRROR_TEST_REDIS_DIR") or f"/tmp/dra-mirror-redis-{port}"
        return cls(binary=Path(binary), port=int(port), workdir=Path(workdir))


@dataclass
class PostgresServer:
    """A private PostgreSQL cluster in ``pgdata``, owned and run by the OS account ``user``.

    The cluster's superuser role has the same name as ``user``; loopback uses trust auth.
    """

    bin_dir: Path
    pgdata: Path
    user: str
    port: int
    database: str = TEST_DATABASE

    @property
    def pg_ctl(self) -> Path:
        return self.bin_dir / "pg_ctl"

    @property
    def url(self) -> str:
        return f"postgresql+asyncpg://{self.user}@{LOOPBACK}:{self.port}/{self.database}"

    @property
    def log(self) -> Path:
        return self.pgdata.parent / "postgres.log"

    def _as_owner(self, command: list[str]) -> list[str]:
        if os.geteuid() != 0 or self.user == "root":
            return command
        if shutil.which("runuser"):
            return ["runuser", "-u", self.user, "--", *command]
        return ["su", self.user, "-s", "/bin/sh", "-c", shlex.join(command)]

    def _run(self, command: list[str], what: str) -> None:
        done = subprocess.run(
            self._as_owner(command), capture_output=True, text=True, check=False, cwd="/"
        )
        if done.returncode != 0:
            detail = (done.stderr or done.stdout).strip()
            raise ServerError(f"{what} failed ({done.returncode}): {detail}{_tail(self.log)}")

    def init(self) -> None:
        """initdb a fresh cluster listening on 127.0.0.1:``port`` only, tuned for tests."""
        root = self.pgdata.parent
        root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(root, user=self.user, group=pwd.getpwnam(self.user).pw_gid)
        try:
            self._run(["test", "-w", str(root)], "test -w")
        except ServerError:
            raise ServerError(
                f"the account {self.user!r} cannot write {root}: every directory above it must "
                "be searchable by that account (a run directory right under /tmp is)"
            ) from None
        self._run(
            [str(self.bin_dir / "initdb"), "-D", str(self.pgdata), "-U", self.user,
             "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions"],
            "initdb",
        )  # fmt: skip
        # Later settings in postgresql.conf win. fsync/full_page_writes off: a crash may
        # corrupt this throwaway cluster, which is fine for tests and much faster.
        settings = {
            "listen_addresses": f"'{LOOPBACK}'",
            "port": str(self.port),
            "unix_socket_directories": f"'{root}'",
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "max_connections": "200",
        }
        # Appending keeps the file's owner; as root we may write into the owner's cluster.
        with (self.pgdata / "postgresql.conf").open("a") as conf:
            conf.writelines(f"{key} = {value}\n" for key, value in settings.items())

    def start(self, timeout: float = 60.0) -> None:
        # -w waits until the postmaster answers; the TCP check covers the loopback listener.
        self._run(
            [str(self.pg_ctl), "-D", str(self.pgdata), "-l", str(self.log), "-w",
             "-t", str(int(timeout)), "start"],
            "pg_ctl start",
        )  # fmt: skip
        _wait(
            lambda: accepts_connections(self.port),
            timeout=timeout,
            what=f"PostgreSQL on port {self.port}",
            log=self.log,
        )

    def stop(self, timeout: float = 60.0) -> None:
        # Fast shutdown: active sessions are disconnected, as in a real failover.
        self._run(
            [str(self.pg_ctl), "-D", str(self.pgdata), "-m", "fast", "-w",
             "-t", str(int(timeout)), "stop"],
            "pg_ctl stop",
        )  # fmt: skip
        _wait(
            lambda: not accepts_connections(self.port),
            timeout=timeout,
            what=f"PostgreSQL on port {self.port} to stop",
            log=self.log,
        )

    def create_database(self) -> None:
        command = [str(self.bin_dir / "createdb"), "-h", LOOPBACK, "-p", str(self.port),
                   "-U", self.user, self.database]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise ServerError(f"createdb failed: {done.stderr.strip()}")

    @classmethod
    def from_env(cls, env: os._Environ[str] | dict[str, str] = os.environ) -> PostgresServer:
        url = urlsplit(_required(env, "DRA_MIRROR_TEST_POSTGRES_URL"))
        if url.port is None:
            raise ServerError("DRA_MIRROR_TEST_POSTGRES_URL has no port")
        return cls(
            bin_dir=Path(_required(env, "DRA_MIRROR_TEST_PG_CTL")).parent,
            pgdata=Path(_required(env, "DRA_MIRROR_TEST_PGDATA")),
            user=_required(env, "DRA_MIRROR_TEST_PG_USER"),
            port=url.port,
            database=url.path.lstrip("/") or TEST_DATABASE,
        )


def _required(env: os._Environ[str] | dict[str, str], name: str) -> str:
    value = env.get(name)
    if not value:
        raise ServerError(
            f"{name} is not set: the test servers are started by scripts/test "
            "(run `scripts/test [pytest args]`)"
        )
    return value


if __name__ == "__main__":  # the older spelling of ``python -m tests.infra.stack``
    import sys

    from tests.infra.stack import main

    raise SystemExit(main(sys.argv[1:]))
