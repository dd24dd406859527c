"""The deploy files configure dra-mirror only through variables it reads: every
``DRA_MIRROR_*`` name in the Helm chart, docker-compose.yml and the Dockerfile is a field
of ``service.settings.Settings`` (``DRA_MIRROR_<GROUP>_<FIELD>``), so a renamed setting
cannot silently stop reaching the process."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEPLOY_FILES = [
    REPO / "docker-compose.yml",
    REPO / "Dockerfile",
    *sorted((REPO / "helm" / "dra-mirror" / "templates").glob("*")),
]
SETTING_NAME = re.compile(r"\bDRA_MIRROR_[A-Z0-9_]*[A-Z0-9]\b")


def _settings_variables() -> set[str]:
    try:
        from dra_mirror.service.settings import ENV_PREFIX, Settings
    except ImportError as error:
        pytest.fail(f"service.settings.Settings is missing ({error})", pytrace=False)
    from dra_mirror.service.slack.config import VARIABLES as SLACK_VARIABLES

    settings = Settings()
    return {
        f"{ENV_PREFIX}{group.name}_{item.name}".upper()
        for group in dataclasses.fields(settings)
        for item in dataclasses.fields(getattr(settings, group.name))
    } | set(SLACK_VARIABLES)  # Slack's own group, read by service.slack.config


def test_deploy_files_set_settings() -> None:
    used = {name for path in DEPLOY_FILES for name in SETTING_NAME.findall(path.read_text())}
    assert {"DRA_MIRROR_STORE_REDIS_URL", "DRA_MIRROR_HISTORY_DATABASE_URL"} <= used


@pytest.mark.parametrize("path", DEPLOY_FILES, ids=lambda path: path.name)
def test_every_variable_is_a_setting(path: Path) -> None:
    known = _settings_variables()
    unknown = sorted(set(SETTING_NAME.findall(path.read_text())) - known)
    assert unknown == [], f"{path.name} sets variables dra-mirror does not read"
