"""Private redis-server and PostgreSQL instances for the test suite, on loopback only.

One implementation serves two callers:

* ``scripts/test`` runs ``python -m tests.infra.servers up RUN_DIR`` to start both servers
  at free ports under a temporary run directory, evaluates the ``export`` lines it prints,
  and runs ``python -m tests.infra.servers down`` on exit (the trap);
* ``tests/conftest.py`` rebuilds the same controllers from those ``DRA_MIRROR_TEST_*``
  variables (``from_env``) so that outage tests can ``stop()`` and ``start()`` a real
  server.

Promises: servers listen on 127.0.0.1 only; ``start()`` returns only once the server
accepts connections (for PostgreSQL: answers the startup handshake), ``stop()`` only
once the port refuses them; every failure raises ``ServerError`` with the server's log
tail. Redis runs without persistence (``--save ''``, no AOF), so a restarted Redis is
empty; PostgreSQL keeps its data across a restart.
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import socket
import subprocess
import sys
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
    """A private, non-persistent redis-server at ``port`` whose files live in ``workdir``."""

    binary: Path
    port: int
    workdir: Path

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
        # --save '' and --appendonly no: nothing is written to disk, a restart starts empty.
        command = [
            str(self.binary),
            "--bind", LOOPBACK,
            "--port", str(self.port),
            "--save", "",
            "--appendonly", "no",
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


def find_redis_server() -> Path:
    found = shutil.which("redis-server") or "/usr/bin/redis-server"
    if not Path(found).exists():
        raise ServerError("redis-server not found (scripts/test installs the redis-server package)")
    return Path(found)


def find_postgres_bin() -> Path:
    """PostgreSQL 15's bin directory, else the newest installed one, else pg_ctl on PATH."""
    preferred = Path("/usr/lib/postgresql/15/bin")
    installed = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
        key=lambda path: int(path.parent.parent.name) if path.parent.parent.name.isdigit() else 0,
    )
    on_path = shutil.which("pg_ctl")
    for candidate in [
        preferred / "pg_ctl",
        *reversed(installed),
        *([Path(on_path)] if on_path else []),
    ]:
        if candidate.exists():
            return candidate.parent
    raise ServerError("PostgreSQL binaries not found (scripts/test installs postgresql-15)")


def postgres_account() -> str:
    """The OS account that owns the test cluster: ourselves, or an unprivileged one as root."""
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid()).pw_name
    for name in ("postgres", FALLBACK_PG_USER):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    subprocess.run(
        [
            "useradd",
            "--system",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
            FALLBACK_PG_USER,
        ],
        check=True,
        capture_output=True,
    )
    return FALLBACK_PG_USER


def up(run_dir: Path) -> dict[str, str]:
    """Start both servers under ``run_dir``; return the variables that describe them."""
    run_dir.mkdir(parents=True, exist_ok=True)
    run_dir.chmod(0o755)  # the PostgreSQL account must reach its data directory below
    redis = RedisServer(binary=find_redis_server(), port=free_port(), workdir=run_dir / "redis")
    redis.start()
    try:
        postgres = PostgresServer(
            bin_dir=find_postgres_bin(),
            pgdata=run_dir / "pg" / "data",
            user=postgres_account(),
            port=free_port(),
        )
        postgres.init()
        postgres.start()
        postgres.create_database()
    except BaseException:
        redis.stop()
        raise
    return {
        "DRA_MIRROR_TEST_REDIS_URL": redis.url,
        "DRA_MIRROR_TEST_REDIS_SERVER": str(redis.binary),
        "DRA_MIRROR_TEST_REDIS_PORT": str(redis.port),
        "DRA_MIRROR_TEST_REDIS_DIR": str(redis.workdir),
        "DRA_MIRROR_TEST_POSTGRES_URL": postgres.url,
        "DRA_MIRROR_TEST_PG_CTL": str(postgres.pg_ctl),
        "DRA_MIRROR_TEST_PGDATA": str(postgres.pgdata),
        "DRA_MIRROR_TEST_PG_USER": postgres.user,
    }


def down(env: os._Environ[str] | dict[str, str] = os.environ) -> None:
    """Stop whatever ``up`` started (as described by ``env``); already stopped is fine."""
    errors: list[str] = []
    try:
        RedisServer.from_env(env).stop()
    except ServerError as error:
        errors.append(str(error))
    try:
        postgres = PostgresServer.from_env(env)
        if (postgres.pgdata / "postmaster.pid").exists():
            postgres.stop()
    except ServerError as error:
        errors.append(str(error))
    if errors:
        raise ServerError("\n".join(errors))


def main(argv: list[str]) -> int:
    if argv[:1] == ["up"] and len(argv) == 2:
        for name, value in up(Path(argv[1]).resolve()).items():
            print(f"export {name}={shlex.quote(value)}")
        return 0
    if argv == ["down"]:
        down()
        return 0
    print("usage: python -m tests.infra.servers up RUN_DIR | down", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
