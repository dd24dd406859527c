"""The chart's PrometheusRule for the mirror's own health, run by `promtool test rules`: each
alert fires on the series that mean trouble (a cluster disconnected or never synced, a watch
falling behind, the history outbox's backlog growing, failed notifications, a history gap)
and stays quiet on healthy ones (a backlog that is large but not growing, a quiet lag)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

CHART = Path(__file__).resolve().parents[2] / "helm/dra-mirror"
TEMPLATE = CHART / "templates/prometheusrule-health.yaml"
ESCAPED = re.compile(r'\{\{ "(\{\{.*?\}\})" \}\}')
HEALTH_VALUE = re.compile(r"\{\{ \$health\.([A-Za-z]+) \}\}")


def rendered_groups() -> list[dict[str, Any]]:
    """The template's rule groups as Helm renders them with the shipped values (its only
    actions are the gate, the metadata, `$health.*` and escaped `{{ }}`)."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    health = values["alerts"]["prometheusRule"]["selfHealth"]
    lines = [line for line in TEMPLATE.read_text().splitlines() if "{{-" not in line]
    text = "\n".join(lines)
    text = text[text.index("\nspec:") :]  # the metadata is Helm's own
    text = HEALTH_VALUE.sub(lambda m: str(health[m[1]]), text)
    text = ESCAPED.sub(lambda m: m[1], text)
    assert "{{ ." not in text and "$health" not in text, "an action the test does not render"
    return yaml.safe_load(text)["spec"]["groups"]


def _alert(_name: str, severity: str, summary: str, **labels: str) -> dict[str, Any]:
    return {
        "exp_labels": {"severity": severity, **labels},
        "exp_annotations": {"summary": summary},
    }


TESTS = {
    "rule_files": ["rules.yaml"],
    "evaluation_interval": "1m",
    "tests": [
        {
            "interval": "1m",
            "input_series": [
                {"series": 'dra_mirror_cluster_connected{cluster="east"}', "values": "0x20"},
                {"series": 'dra_mirror_cluster_connected{cluster="west"}', "values": "1x20"},
                {"series": 'dra_mirror_cluster_connected{cluster="north"}', "values": "1x20"},
                {"series": 'dra_mirror_cluster_synced{cluster="east"}', "values": "0x20"},
                {"series": 'dra_mirror_cluster_synced{cluster="west"}', "values": "0x20"},
                {"series": 'dra_mirror_cluster_synced{cluster="north"}', "values": "1x20"},
                {"series": 'dra_mirror_cluster_lag_seconds{cluster="west"}', "values": "5+10x20"},
                {"series": 'dra_mirror_cluster_lag_seconds{cluster="north"}', "values": "30x20"},
                {"series": 'dra_mirror_history_outbox_backlog{instance="a"}', "values": "0+200x20"},
                {"series": 'dra_mirror_history_outbox_backlog{instance="b"}', "values": "2000x20"},
                {"series": 'dra_mirror_alert_notifications_total{result="failed"}',
                 "values": "0 0 0 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1"},
                {"series": 'dra_mirror_alert_notifications_total{result="sent"}',
                 "values": "0+3x20"},
                {"series": "dra_mirror_history_gaps_total", "values": "0x10 1x10"},
            ],
            "alert_rule_test": [
                {"eval_time": "5m", "alertname": "DraMirrorClusterDisconnected", "exp_alerts": []},
                {"eval_time": "20m", "alertname": "DraMirrorClusterDisconnected", "exp_alerts": [
                    _alert("", "critical", "dra-mirror cannot watch cluster east: its answers "
                           "about it are stale", cluster="east")]},
                {"eval_time": "20m", "alertname": "DraMirrorClusterUnsynced", "exp_alerts": [
                    _alert("", "warning", "dra-mirror has not listed every kind of cluster "
                           "west yet", cluster="west")]},
                {"eval_time": "20m", "alertname": "DraMirrorWatchLag", "exp_alerts": [
                    _alert("", "warning", "dra-mirror's view of cluster west is 3m 25s behind",
                           cluster="west")]},
                {"eval_time": "20m", "alertname": "DraMirrorHistoryBacklogGrowing", "exp_alerts": [
                    _alert("", "warning", "4000 history entries wait for the database, and "
                           "more keep coming (database down or too slow)", instance="a")]},
                {"eval_time": "2m", "alertname": "DraMirrorNotificationsFailing", "exp_alerts": []},
                {"eval_time": "5m", "alertname": "DraMirrorNotificationsFailing", "exp_alerts": [
                    _alert("", "warning", "dra-mirror failed to deliver alert notifications "
                           "(Slack refused or unreachable); it retries", result="failed")]},
                {"eval_time": "9m", "alertname": "DraMirrorHistoryGap", "exp_alerts": []},
                {"eval_time": "15m", "alertname": "DraMirrorHistoryGap", "exp_alerts": [
                    _alert("", "info", "the history has a new gap: a cluster was not watched "
                           "for a while (restart, lost lease or outbox)")]},
            ],
        }
    ],
}  # fmt: skip


def test_every_rule_is_exercised() -> None:
    names = {r["alert"] for g in rendered_groups() for r in g["rules"]}
    tested = {t["alertname"] for t in TESTS["tests"][0]["alert_rule_test"]}
    assert names == tested


def test_promtool_test_rules_passes(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is missing (Debian's prometheus package; scripts/test installs it)")
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": rendered_groups()}))
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(TESTS))
    check = subprocess.run(
        [promtool, "check", "rules", "rules.yaml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr
    run = subprocess.run(
        [promtool, "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout + run.stderr
