"""The suite shares one process and tests leave its garbage collector as they found it: a
mirror whose clusters synced freezes its heap (`service.runtime.mirror.freeze_heap`), so unfreeze after."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def unfrozen_heap() -> Iterator[None]:
    yield
    gc.unfreeze()
