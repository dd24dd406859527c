"""How long a write waits for its master's replica: WAIT's timeout, sized to what was written.

Replication is asynchronous: after a write, `WAIT replicas timeout` on the same connection
answers how many replicas hold every write of that connection so far. A replica takes in a
write at the speed of the link and of its own event loop: a batch of a few kilobytes arrives in
well under a millisecond, the LIST of 5,000 nodes' ResourceSlices (~110 MB of commands) in
seconds. A fixed timeout sized for the first would time out for the second — the writer
would count a healthy replica as missing and stop waiting for every batch for a while — and
one sized for the second would stall every small batch behind a replica that is really gone.

`Wait(replicas, base_ms, ms_per_mib).timeout_ms(sent)` is the base plus `ms_per_mib` for
every MiB sent; the state store (`RedisStore`) and the history outbox (`RedisStreamOutbox`)
both use it.
"""

from __future__ import annotations

from typing import NamedTuple

MIB = 2**20
MS_PER_MIB = 100
"""Default milliseconds WAIT allows per MiB written, on top of its base: a replica that takes
in less than 10 MiB/s is counted as missing (loopback and a LAN do 100 MiB/s and more)."""


class Wait(NamedTuple):
    """WAIT for `replicas` replicas, `base_ms` plus `ms_per_mib` for every MiB written."""

    replicas: int
    base_ms: int
    ms_per_mib: int = MS_PER_MIB

    def timeout_ms(self, sent: int) -> int:
        """WAIT's timeout after a write of `sent` bytes (at least 1 ms: 0 would block)."""
        return max(1, self.base_ms + sent * self.ms_per_mib // MIB)

    def command(self, sent: int) -> list[bytes]:
        return [b"WAIT", b"%d" % self.replicas, b"%d" % self.timeout_ms(sent)]
