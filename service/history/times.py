"""RFC 3339 times ↔ integer microseconds since the Unix epoch, and bucket sizes.

History stores every instant as a BIGINT of microseconds (UTC) so that SQLite and PostgreSQL do
the same exact integer arithmetic for overlaps and durations. Promises: `to_us(to_rfc3339(x)) ==
x` for every whole-microsecond instant; naive times are taken as UTC; Kubernetes' `Z` suffix and
fractional seconds (up to microseconds) are accepted. Anything that is not a time of years
0001-9999 in UTC is a `BadTime` naming at most 40 characters of what was given.
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)
US_PER_SECOND = 1_000_000
US_PER_HOUR = 3600 * US_PER_SECOND
MIN_US = (datetime.min.replace(tzinfo=UTC) - EPOCH) // MICROSECOND  # 0001-01-01T00:00:00Z
MAX_US = (datetime.max.replace(tzinfo=UTC) - EPOCH) // MICROSECOND  # 9999-12-31T23:59:59.999999Z

# At most 12 digits: int() refuses numbers of more than 4,300, and nothing needs more.
_BUCKET = re.compile(r"^\s*([0-9]{1,12})\s*([smhdw])\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class BadTime(ValueError):
    """A time or bucket size a client gave cannot be read."""


@functools.lru_cache(maxsize=8192)
def to_us(value: str | datetime) -> int:
    """Microseconds since the epoch of an RFC 3339 string or a datetime. Cached: the
    transitions of one batch share a handful of observation times."""
    if isinstance(value, str):
        text = value
        try:
            value = datetime.fromisoformat(text.strip())
        except ValueError:
            raise BadTime(f"not an RFC 3339 time: {_shown(text)}") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    us = (value - EPOCH) // MICROSECOND
    if not MIN_US <= us <= MAX_US:  # 0001-01-01T00:00:00+01:00 is before year 1 in UTC
        raise BadTime(f"{value.isoformat()} is outside years 0001-9999 in UTC")
    return us


def _shown(value: str) -> str:
    return repr(value if len(value) <= 40 else value[:40] + "…")


def to_datetime(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)


def to_rfc3339(us: int) -> str:
    """`2026-11-29T23:49:37Z`, with `.ffffff` only when the instant has a fraction."""
    moment = to_datetime(us)
    # not strftime("%Y"): C libraries print year 1 as "1", not RFC 3339's "0001"
    text = f"{moment.year:04d}-" + moment.strftime("%m-%dT%H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond:06d}"
    return text + "Z"


def bucket_us(size: str | None) -> int | None:
    """A bucket size such as `1h`, `6h`, `1d`, `7d`, `30m` in microseconds; None: one bucket."""
    if size is None or not size.strip():
        return None
    match = _BUCKET.match(size)
    if not match or int(match.group(1)) == 0:
        raise BadTime(f"bucket must look like 15m, 1h, 1d or 7d, not {_shown(size)}")
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2)] * US_PER_SECOND
