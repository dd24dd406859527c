"""The reactor tests reuse the watcher tests' helpers (fast settings, recording sleep)."""

from __future__ import annotations

import pytest

from tests.clusters.conftest import RecordingSleep


@pytest.fixture
def recording_sleep() -> RecordingSleep:
    return RecordingSleep()
