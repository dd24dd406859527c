"""The stores a process runs on, from its settings.

* `open_state_store(settings)` — a `RedisStore` when `store.redis_url` is set (state shared
  by every replica), else the embedded `MemoryStore`;
* `open_history(settings, upgrade=...)` — the history database (migrated when `upgrade`: the
  watching process owns the schema) with its writer started, its outbox the deployment's
  Redis stream when a Redis URL is set (watchers append, every process with a database URL
  drains it under one drain lease), else in-process;
* `writer_options(settings)`, `lease_settings(settings)` — the history writer's housekeeping
  and the watch leases' timing, from the settings.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, TypeAlias

from dra_mirror.service.history.options import WriterOptions
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.memory import MemoryStore

if TYPE_CHECKING:  # SQLAlchemy and Alembic load only when a history database is configured,
    # the Redis client and the leases only when a Redis URL is
    from dra_mirror.service.history.outbox import Outbox
    from dra_mirror.service.history.runtime import History
    from dra_mirror.service.stores.lease import LeaseSettings
    from dra_mirror.service.stores.redis import RedisStore

StateStores: TypeAlias = "MemoryStore | RedisStore"


def open_state_store(settings: Settings) -> StateStores:
    """The state store the settings ask for: in memory, or Redis when a URL is given."""
    if settings.store.redis_url:
        from dra_mirror.service.stores.redis import RedisStore

        return RedisStore.from_url(settings.store.redis_url, prefix=settings.store.redis_prefix)
    return MemoryStore()


def writer_options(settings: Settings) -> WriterOptions:
    """The history writer's options from the settings (0 days: that housekeeping is off)."""
    history = settings.history
    return WriterOptions(
        retention_days=history.retention_days or None,
        warm_days=history.peak_warm_days or None,
    )


def history_outbox(settings: Settings) -> Outbox | None:
    """With a Redis URL, the deployment's Redis stream outbox; else None: in-process."""
    if not settings.store.redis_url:
        return None
    from dra_mirror.service.history.redis_outbox import RedisStreamOutbox

    return RedisStreamOutbox.from_url(
        settings.store.redis_url,
        prefix=settings.store.redis_prefix,
        consumer=settings.history.outbox_consumer or socket.gethostname(),
        claim_idle=settings.history.outbox_claim_idle,
        lease_ttl=settings.store.lease_ttl,
    )


async def open_history(settings: Settings, *, upgrade: bool) -> History:
    """The history database of the settings (`history.database_url` must be set)."""
    url = settings.history.database_url
    if not url:
        raise ValueError("no history database configured")
    from dra_mirror.service.history.prices import load
    from dra_mirror.service.history.runtime import History

    prices = load(settings.history.prices)  # checked at start (configuration.prices_config)
    history = await History.open(
        url, upgrade=upgrade, outbox=history_outbox(settings), options=writer_options(settings)
    )
    history.prices = prices
    return history


def lease_settings(settings: Settings) -> LeaseSettings:
    """Renew every third of the TTL, retry a lease every fifth (docs/redis.md)."""
    from dra_mirror.service.stores.lease import LeaseSettings

    ttl = settings.store.lease_ttl
    return LeaseSettings(ttl=ttl, renew_interval=ttl / 3, retry_interval=ttl / 5)
