"""The /readyz rules on their own: the state store must answer, every cluster answered for
must have synced (an expected one without status has not), and a cluster that is down is
served stale with a flag or makes the process not ready, as configured."""

from __future__ import annotations

import pytest

from dra_mirror.service.http.readiness import NOT_READY, SERVE_STALE, StoreHealth, readiness
from dra_mirror.service.stores.protocols import ClusterStatus

UP = StoreHealth(True)


def status(name: str, *, synced: bool = True, connected: bool = True, **kw) -> ClusterStatus:
    return ClusterStatus(name=name, synced=synced, connected=connected, **kw)


def test_every_cluster_synced_and_connected_is_ready() -> None:
    answer = readiness(store=UP, statuses=[status("east"), status("west")])
    assert (answer.ready, answer.status_code, answer.reasons) == (True, 200, ())
    assert answer.body() == {
        "ready": True, "reasons": [], "stale": [], "clusters": {"east": "synced", "west": "synced"}
    }  # fmt: skip


def test_a_state_store_that_does_not_answer_is_never_ready() -> None:
    down = StoreHealth(False, "Redis 127.0.0.1:6379: connection refused")
    for rule in (SERVE_STALE, NOT_READY):
        answer = readiness(store=down, statuses=[status("east")], cluster_down=rule)
        assert not answer.ready and answer.status_code == 503
        assert answer.reasons == (
            "state store unavailable: Redis 127.0.0.1:6379: connection refused",
        )
    assert readiness(store=StoreHealth(False), statuses=[]).reasons == ("state store unavailable",)


def test_a_partial_state_is_not_ready_whatever_the_rule() -> None:
    # e.g. a watcher crashed mid-sync: the shared status says synced=false
    partial = status("east", synced=False, connected=True)
    for rule in (SERVE_STALE, NOT_READY):
        answer = readiness(store=UP, statuses=[partial, status("west")], cluster_down=rule)
        assert not answer.ready
        assert answer.reasons == ("east: not synced yet",)
        assert answer.clusters == {"east": "syncing", "west": "synced"}
    failing = status("east", synced=False, connected=False, error="503 ServiceUnavailable")
    assert readiness(store=UP, statuses=[failing]).reasons == (
        "east: not synced yet; error: 503 ServiceUnavailable",
    )


def test_an_expected_cluster_without_a_status_has_not_synced() -> None:
    answer = readiness(store=UP, statuses=[status("east")], expected=["east", "west"])
    assert not answer.ready and answer.reasons == ("west: no status yet (not synced)",)
    assert answer.clusters == {"east": "synced", "west": "unknown"}


def test_a_standby_watcher_holding_no_cluster_is_ready() -> None:
    assert readiness(store=UP, statuses=[]).ready


def test_a_down_cluster_is_served_stale_with_a_flag() -> None:
    down = status("east", connected=False, error="503", last_event_at="2026-12-01T10:00:00.000Z")
    answer = readiness(store=UP, statuses=[down, status("west")], cluster_down=SERVE_STALE)
    assert answer.ready and answer.status_code == 200
    assert answer.stale == ("east",) and answer.body()["stale"] == ["east"]
    assert answer.clusters == {"east": "stale", "west": "synced"}


def test_a_down_cluster_makes_the_process_not_ready_when_so_configured() -> None:
    down = status("east", connected=False, error="503", last_event_at="2026-12-01T10:00:00.000Z")
    answer = readiness(store=UP, statuses=[down, status("west")], cluster_down=NOT_READY)
    assert not answer.ready and answer.stale == ()
    assert answer.reasons == (
        "east: not connected (state as of 2026-12-01T10:00:00.000Z); error: 503",
    )
    assert answer.clusters["east"] == "down"


def test_an_unknown_rule_is_refused() -> None:
    with pytest.raises(ValueError, match="serve-stale, not-ready"):
        readiness(store=UP, statuses=[], cluster_down="maybe")
