"""The click CLI: schema printing/writing, the simulator's scenario list, usage errors, and
`serve` failing clearly on a kubeconfig without the asked context."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from dra_mirror import schema
from dra_mirror.service.cli.main import main


def test_schema_prints_the_committed_sdl():
    result = CliRunner().invoke(main, ["schema"])
    assert result.exit_code == 0, result.output
    assert result.output == schema.SDL_PATH.read_text()


def test_schema_write_to_a_file(tmp_path: Path):
    target = tmp_path / "schema.graphql"
    result = CliRunner().invoke(main, ["schema", "--write", "--output", str(target)])
    assert result.exit_code == 0, result.output
    assert target.read_text() == schema.print_sdl()


def test_sim_lists_the_shipped_scenarios():
    result = CliRunner().invoke(main, ["sim", "--list-scenarios"])
    assert result.exit_code == 0, result.output
    assert {"demo", "scale-5000"} <= set(result.output.split())


def test_sim_usage_errors():
    runner = CliRunner()
    missing = runner.invoke(main, ["sim"])
    assert missing.exit_code == 2 and "--scenario" in missing.output
    unknown = runner.invoke(main, ["sim", "--scenario", "no-such-scenario"])
    assert unknown.exit_code == 2 and "no-such-scenario" in unknown.output


def test_serve_refuses_a_missing_kubeconfig(tmp_path: Path):
    result = CliRunner().invoke(
        main, ["serve", "--kubeconfig", str(tmp_path / "nope"), "--insecure-no-auth"]
    )
    assert result.exit_code == 2 and "does not exist" in result.output


def test_serve_fails_clearly_on_an_unknown_context(tmp_path: Path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {}}]\ncontexts: [{name: east, context: {cluster: c, user: u}}]\n"
        "current-context: east\n"
    )
    result = CliRunner().invoke(
        main,
        ["serve", "--kubeconfig", str(kubeconfig), "--context", "west", "--port", "0",
         "--insecure-no-auth"],
    )  # fmt: skip
    assert result.exit_code == 2  # a configuration problem, found before anything starts
    assert "startup failed" not in result.output and "has no context 'west'" in result.output


def test_serve_refuses_to_start_without_authentication(tmp_path: Path, monkeypatch):
    for name in ("CONFIG", "STATIC_TOKENS", "OIDC_ISSUER", "KUBERNETES_CONTEXT",
                 "INSECURE_NO_AUTH"):  # fmt: skip
        monkeypatch.delenv(f"DRA_MIRROR_ACCESS_{name}", raising=False)
    refused = CliRunner().invoke(main, ["serve", "--port", "0"])
    assert refused.exit_code == 2
    assert "no authentication is configured" in refused.output
    assert "--insecure-no-auth" in refused.output
    monkeypatch.setenv("DRA_MIRROR_ACCESS_STATIC_TOKENS", str(tmp_path / "absent.yaml"))
    missing = CliRunner().invoke(main, ["watch", "--redis-url", "redis://127.0.0.1:1"])
    assert missing.exit_code == 2 and "absent.yaml" in missing.output


def test_bad_environment_is_a_usage_error(monkeypatch):
    monkeypatch.setenv("DRA_MIRROR_HTTP_PORT", "eighty")
    result = CliRunner().invoke(main, ["demo"])
    assert result.exit_code == 2 and "DRA_MIRROR_HTTP_PORT='eighty'" in result.output


def test_migrate_creates_the_history_schema(tmp_path: Path):
    import sqlite3

    database = tmp_path / "history.db"
    result = CliRunner().invoke(main, ["migrate", "--database-url", str(database)])
    assert result.exit_code == 0, result.output
    tables = {row[0] for row in sqlite3.connect(database).execute("select name from sqlite_master")}
    assert "alembic_version" in tables


def test_migrate_needs_a_database(monkeypatch):
    monkeypatch.delenv("DRA_MIRROR_HISTORY_DATABASE_URL", raising=False)
    result = CliRunner().invoke(main, ["migrate"])
    assert result.exit_code == 2 and "--database-url" in result.output


def test_split_deployment_commands_need_the_shared_store(monkeypatch):
    monkeypatch.delenv("DRA_MIRROR_STORE_REDIS_URL", raising=False)
    runner = CliRunner()
    api_only = runner.invoke(main, ["serve", "--no-watch"])
    assert api_only.exit_code == 2 and "--redis-url" in api_only.output
    watcher = runner.invoke(main, ["watch"])
    assert watcher.exit_code == 2 and "--redis-url" in watcher.output
