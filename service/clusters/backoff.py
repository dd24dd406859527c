"""Reconnect delays: exponential backoff with full jitter, and the server's Retry-After.

Full jitter (a uniform delay between 0 and `min(cap, base * 2**attempt)`) spreads the
reconnects of many watchers after an API server restart instead of bringing them back in
waves. When the server says how long to wait (`Retry-After` on 429 and 5xx, as API Priority
and Fairness does), that wait is used as given (up to `retry_after_cap`): the server knows
its load better than our guess.

Promises: pure arithmetic around an injected random generator; sleeping is the caller's.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Backoff:
    """The delay before the next attempt; `reset()` after a success."""

    base: float = 0.5
    """Upper bound of the first delay, seconds."""
    cap: float = 30.0
    """Upper bound of any computed delay, seconds."""
    retry_after_cap: float = 300.0
    """Longest Retry-After obeyed, seconds (a broken proxy could ask for hours)."""
    rng: random.Random = field(default_factory=random.Random)
    """Source of jitter; tests pass a seeded one."""
    attempt: int = 0
    """Failures since the last success."""

    def next_delay(self, retry_after: float | None = None) -> float:
        """The delay for this failure, counting it."""
        self.attempt += 1
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.retry_after_cap)
        ceiling = min(self.cap, self.base * (2 ** min(self.attempt - 1, 32)))
        return self.rng.uniform(0.0, ceiling)

    def reset(self) -> None:
        self.attempt = 0
