"""The alerts as Prometheus series, for the app's registry:

    dra_mirror_alerts{rule, cluster, namespace, name, severity} 1   one per firing alert
    dra_mirror_alert_notifications_total{result="sent"|"failed"}

A scrape reads the engine's firing alerts at that moment (a custom collector: no series is
left behind once an alert resolves). The Helm chart's `PrometheusRule` turns the first into
Alertmanager alerts (values `alerts.prometheusRule.enabled`).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from .engine import AlertEngine


class AlertsCollector(Collector):
    def __init__(self, engine: AlertEngine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        firing = GaugeMetricFamily(
            "dra_mirror_alerts",
            "Alerts firing now (1 per alert), by rule and subject.",
            labels=["rule", "cluster", "namespace", "name", "severity"],
        )
        for alert in list(self.engine.firing.values()):
            c = alert.condition
            firing.add_metric([c.rule, c.cluster, c.namespace, c.name, alert.severity], 1)
        yield firing
        sent = CounterMetricFamily(
            "dra_mirror_alert_notifications",
            "Alert notifications (fired or resolved) by result.",
            labels=["result"],
        )
        for result, count in self.engine.notifications.items():
            sent.add_metric([result], count)
        yield sent
