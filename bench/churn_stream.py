"""Claim churn for the page server: MODIFIED events on a WATCH stream, at a set rate.

`ClaimChurn.from_pages(pages)` takes the reserved claims of a recorded scenario and makes two
versions of each — consumers gone (`status.reservedFor` empty: the claim turns idle) and back —
encoded once around their resourceVersion. `stream(write, rate, seconds)` then writes event i
(claim i mod n, idle and reserved on alternate rounds, resourceVersion `base + i`) at `t0 + i / rate`, in one
chunk per tick of whatever is due, where `t0` is the wall-clock start (`time.time()`, shared by
every process on the machine): a reader computes each event's lag from its resourceVersion.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable

import msgspec
import orjson

BASE_VERSION = 100_000_000
_MARK = "__resource_version__"


class _Page(msgspec.Struct):
    items: list[msgspec.Raw] = []


def _around_version(claim: dict) -> tuple[bytes, bytes]:
    claim["metadata"]["resourceVersion"] = _MARK
    line = orjson.dumps({"type": "MODIFIED", "object": claim})
    before, after = line.split(f'"{_MARK}"'.encode())
    return before + b'"', b'"' + after + b"\n"


class ClaimChurn:
    """Pre-encoded claim versions and the schedule of their events."""

    def __init__(self, versions: list[tuple[bytes, bytes]]) -> None:
        self.versions = versions

    @classmethod
    def from_pages(cls, pages: Iterable[bytes]) -> ClaimChurn:
        versions = []
        for body in pages:
            for raw in msgspec.json.decode(body, type=_Page).items:
                claim = orjson.loads(bytes(raw))
                if not (claim.get("status") or {}).get("reservedFor"):
                    continue
                idle = orjson.loads(bytes(raw))
                idle["status"].pop("reservedFor")
                versions.append((_around_version(idle), _around_version(claim)))
        return cls([version for pair in versions for version in pair])

    def line(self, number: int) -> bytes:
        """Event `number`: claim `number mod n`, idle on even rounds over the claims, reserved
        again on odd ones (so one batch of the reactor never holds two events of one claim)."""
        pairs = len(self.versions) // 2
        claim, reserved = number % pairs, (number // pairs) % 2
        before, after = self.versions[2 * claim + reserved]
        return before + str(BASE_VERSION + number).encode() + after

    async def stream(
        self,
        write: Callable[[bytes], Awaitable[None]],
        *,
        rate: float,
        seconds: float,
        started: Callable[[float], None],
    ) -> None:
        total = int(rate * seconds)
        t0 = time.time()
        started(t0)
        sent = 0
        while sent < total:
            due = min(total, int((time.time() - t0) * rate) + 1)
            if due <= sent:
                await asyncio.sleep(max(0.0, t0 + (sent + 1) / rate - time.time()))
                continue
            await write(b"".join(self.line(n) for n in range(sent, due)))
            sent = due
