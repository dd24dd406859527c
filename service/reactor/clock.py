"""The time a reactor reads and waits on, injected so tests run backoffs and batches at once.

`Clock` gives the observation time of each batch (`utc_now` in production); `rfc3339` is the
one text form those times take in Changes, statuses and history (UTC, milliseconds, `Z`);
`Sleep` is the wait (`asyncio.sleep` in production).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]
Sleep = Callable[[float], Awaitable[None]]


def utc_now() -> datetime:
    return datetime.now(UTC)


def rfc3339(moment: datetime) -> str:
    """`2026-11-29T23:49:37.123Z`: UTC, millisecond precision."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
