"""The chart's PrometheusRule: rendered only when asked, one Alertmanager alert per rule."""

from __future__ import annotations

from pathlib import Path

from dra_mirror.service.alerts.rules import RULES, SEVERITY

TEMPLATE = Path(__file__).resolve().parents[2] / "helm/dra-mirror/templates/prometheusrule.yaml"


def test_every_rule_has_an_alert_gated_by_its_value() -> None:
    text = TEMPLATE.read_text()
    assert text.startswith("{{- if .Values.alerts.prometheusRule.enabled }}")
    for rule in RULES:
        expr = f'expr: dra_mirror_alerts{{rule="{rule}"}} == 1'
        assert expr in text, rule
        after = text[text.index(expr) :]
        assert f"labels: {{severity: {SEVERITY[rule]}}}" in after.split("- alert:")[0]
