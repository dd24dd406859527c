"""Settings from flags and DRA_MIRROR_* variables; log lines with structured fields."""

from __future__ import annotations

import io
import logging

import orjson
import pytest

from dra_mirror.service.logs import configure_logging
from dra_mirror.service.settings import Settings, SettingsError


def test_defaults_are_the_embedded_ones():
    settings = Settings.from_env(environ={})
    assert (settings.http.host, settings.http.port) == ("127.0.0.1", 8000)
    assert settings.store.redis_url is None and settings.clusters.contexts == ()
    assert settings.graphql.max_page_size == 1000


def test_environment_then_flags():
    environ = {
        "DRA_MIRROR_HTTP_PORT": "9000",
        "DRA_MIRROR_HTTP_GRAPHIQL": "false",
        "DRA_MIRROR_CLUSTERS_CONTEXTS": "east, west",
        "DRA_MIRROR_STORE_REDIS_URL": "redis://127.0.0.1:6379/0",
        "DRA_MIRROR_HISTORY_DATABASE_URL": "",
    }
    settings = Settings.from_env({"http.port": 9100, "http.host": None}, environ=environ)
    assert settings.http.port == 9100  # the flag wins
    assert settings.http.host == "127.0.0.1"  # an unset flag does not
    assert settings.http.graphiql is False
    assert settings.clusters.contexts == ("east", "west")
    assert settings.store.redis_url == "redis://127.0.0.1:6379/0"
    assert settings.history.database_url is None  # empty means unset


def test_history_housekeeping_reaches_the_writer():
    from dra_mirror.service.runtime.stores import writer_options

    defaults = writer_options(Settings.from_env(environ={}))
    assert (defaults.retention_days, defaults.warm_days) == (None, 35.0)  # versions kept
    environ = {"DRA_MIRROR_HISTORY_RETENTION_DAYS": "30",
               "DRA_MIRROR_HISTORY_PEAK_WARM_DAYS": "0"}  # fmt: skip
    options = writer_options(Settings.from_env(environ=environ))
    assert (options.retention_days, options.warm_days) == (30.0, None)
    with pytest.raises(SettingsError, match="RETENTION_DAYS"):
        Settings.from_env(environ={"DRA_MIRROR_HISTORY_RETENTION_DAYS": "a month"})


def test_bad_values_and_unknown_overrides_are_refused():
    with pytest.raises(SettingsError, match="DRA_MIRROR_HTTP_PORT"):
        Settings.from_env(environ={"DRA_MIRROR_HTTP_PORT": "x"})
    with pytest.raises(SettingsError, match="DRA_MIRROR_LOG_JSON"):
        Settings.from_env(environ={"DRA_MIRROR_LOG_JSON": "maybe"})
    with pytest.raises(SettingsError, match=r"http\.nope"):
        Settings.from_env({"http.nope": 1}, environ={})


def test_settings_are_frozen():
    with pytest.raises(AttributeError):
        Settings().http.port = 1  # type: ignore[misc]


@pytest.mark.parametrize("as_json", [False, True])
def test_log_lines_carry_the_object_reference(as_json: bool):
    stream = io.StringIO()
    handler = configure_logging("INFO", json=as_json, stream=stream)
    try:
        logging.getLogger("service.test").warning(
            "skipping malformed %s",
            "Pod",
            extra={"cluster": "east", "kind": "Pod", "namespace": "team-a", "object_name": "web-0"},
        )
        line = stream.getvalue().strip()
        if as_json:
            entry = orjson.loads(line)
            assert entry["message"] == "skipping malformed Pod" and entry["level"] == "WARNING"
            assert (entry["cluster"], entry["kind"], entry["namespace"], entry["name"]) == (
                "east",
                "Pod",
                "team-a",
                "web-0",
            )
            assert entry["logger"] == "service.test"
        else:
            assert line.endswith(
                "WARNING service.test: skipping malformed Pod cluster=east kind=Pod namespace=team-a name=web-0"
            )
    finally:
        logging.getLogger().removeHandler(handler)


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"DRA_MIRROR_HTTP_PORT": "99999"}, "port 99999: must be 1-65535"),
        ({"DRA_MIRROR_HTTP_HOST": "two words"}, "must be a host name or address"),
        ({"DRA_MIRROR_STORE_REDIS_URL": "http://:pw@cache"}, "Redis URL: must be redis://"),
        ({"DRA_MIRROR_STORE_LEASE_TTL": "0"}, "store lease_ttl 0.0: must be a number > 0"),
        ({"DRA_MIRROR_LOG_LEVEL": "chatty"}, "log level 'chatty'"),
        ({"DRA_MIRROR_GRAPHQL_MAX_PAGE_SIZE": "0"}, "max_page_size 0"),
        ({"DRA_MIRROR_HISTORY_RETENTION_DAYS": "-1"}, "retention_days -1.0: must be a number >= 0"),
        ({"DRA_MIRROR_CLUSTERS_BOOKMARK_INTERVAL": "0"}, "bookmark_interval 0.0"),
        ({"DRA_MIRROR_READINESS_CLUSTER_DOWN": "maybe"}, "serve-stale, not-ready"),
    ],
)
def test_values_are_checked_when_the_settings_are_built(environ, message):
    with pytest.raises(SettingsError) as raised:
        Settings.from_env(environ=environ)
    assert message in str(raised.value) and "\n" not in str(raised.value)
    assert "pw" not in str(raised.value)  # a URL is never repeated


def test_watch_and_readiness_settings():
    settings = Settings.from_env(
        environ={
            "DRA_MIRROR_CLUSTERS_BOOKMARK_INTERVAL": "30",
            "DRA_MIRROR_CLUSTERS_STALL_INTERVALS": "3",
            "DRA_MIRROR_READINESS_CLUSTER_DOWN": "not-ready",
            "DRA_MIRROR_LOG_LEVEL": "debug",
        }
    )
    assert (settings.clusters.bookmark_interval, settings.clusters.stall_intervals) == (30, 3)
    assert settings.readiness.cluster_down == "not-ready"
    assert Settings().readiness.cluster_down == "serve-stale"
    assert Settings().clusters.bookmark_interval * Settings().clusters.stall_intervals == 120
