"""The utilisation source's one configuration file, read and checked at start.

    DRA_MIRROR_UTILIZATION_CONFIG=/etc/dra-mirror/utilization.yaml   (unset: no utilisation)

```yaml
busyBelow: 5                 # percent: a held device below it is not busy (default 5)
notBusyAfterMinutes: 30      # ... once it has stayed below that long (default 30)
stepSeconds: 60              # the resolution asked of Prometheus (default 60)
pricePerKwh: 0.12            # what a kWh costs (optional): held-not-busy rows say their cost
clusters:
  east:
    url: http://prometheus.monitoring:9090     # the server's base URL (Thanos, Mimir: theirs)
    bearerTokenFile: /var/run/secrets/prometheus/token   # or basicAuth, or neither
    # basicAuth: {username: mirror, passwordFile: /var/run/secrets/prometheus/password}
    headers: {X-Scope-OrgID: gpu}              # sent with every query (optional)
    selector: 'cluster="east"'                 # label matchers added to every series (optional)
    timeoutSeconds: 10                         # per query (default 10)
    labels:                                    # where the exporter's labels differ (optional)
      uuid: UUID
      gpuInstance: GPU_I_ID
      gpuProfile: GPU_I_PROFILE
      migDeviceUuid: dra_mig_device_uuid
      driver: dra_driver_name
      pool: dra_pool_name
      device: dra_device_name
```

Every mistake — an unknown key, a URL that is not http(s), a threshold out of range, a
token file that cannot be read, a selector with a brace — raises `UtilizationConfigError`
naming the place, so a mirror with a bad file refuses to start (exit 2).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from dra_mirror.service.model.dcgm import LabelNames
from dra_mirror.service.settings_values import read_yaml

ENV = "DRA_MIRROR_UTILIZATION_CONFIG"
_LABEL_KEYS = {
    "uuid": "uuid",
    "gpuInstance": "gpu_instance",
    "gpuProfile": "gpu_profile",
    "migDeviceUuid": "mig_device_uuid",
    "driver": "driver",
    "pool": "pool",
    "device": "device",
}
_CLUSTER_KEYS = {
    "url",
    "bearerTokenFile",
    "basicAuth",
    "headers",
    "selector",
    "timeoutSeconds",
    "labels",
}
_TOP_KEYS = {"busyBelow", "notBusyAfterMinutes", "stepSeconds", "pricePerKwh", "clusters"}


class UtilizationConfigError(ValueError):
    """The utilisation configuration is wrong; the message says where and why."""


@dataclass(frozen=True)
class PrometheusTarget:
    """One cluster's Prometheus server and how to ask it."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)  # auth included
    selector: str = ""  # label matchers, without braces
    timeout: float = 10.0
    labels: LabelNames = field(default_factory=LabelNames)


@dataclass(frozen=True)
class UtilizationConfig:
    clusters: Mapping[str, PrometheusTarget]
    busy_below: float = 5.0  # percent
    not_busy_after: float = 1800.0  # seconds
    step: float = 60.0  # seconds
    price_per_kwh: float | None = None  # what a kWh costs, in the reader's currency


def load(path: str | None) -> UtilizationConfig | None:
    """The file at `path`, checked; None when no path is given."""
    if not path:
        return None
    return parse(read_yaml(path, UtilizationConfigError), where=path)


def parse(doc: Any, *, where: str = "utilization") -> UtilizationConfig:
    """A parsed document, checked."""
    if not isinstance(doc, dict):
        raise UtilizationConfigError(f"{where}: must be a mapping")
    _known(doc, _TOP_KEYS, where)
    busy = _number(doc.get("busyBelow", 5), f"{where}: busyBelow", top=100)
    after = _number(doc.get("notBusyAfterMinutes", 30), f"{where}: notBusyAfterMinutes")
    step = _number(doc.get("stepSeconds", 60), f"{where}: stepSeconds", positive=True)
    clusters = doc.get("clusters")
    if not isinstance(clusters, dict) or not clusters:
        raise UtilizationConfigError(f"{where}: clusters: must map cluster names to servers")
    targets = {str(n): _target(c, f"{where}: clusters.{n}") for n, c in clusters.items()}
    price = doc.get("pricePerKwh")
    if price is not None:
        price = _number(price, f"{where}: pricePerKwh")
    return UtilizationConfig(
        targets, busy_below=busy, not_busy_after=after * 60, step=step, price_per_kwh=price
    )


def _target(doc: Any, where: str) -> PrometheusTarget:
    if not isinstance(doc, dict):
        raise UtilizationConfigError(f"{where}: must be a mapping with a url")
    _known(doc, _CLUSTER_KEYS, where)
    url = doc.get("url")
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        raise UtilizationConfigError(f"{where}: url: must be an http(s) URL")
    headers = {str(k): str(v) for k, v in (_mapping(doc, "headers", where)).items()}
    if doc.get("bearerTokenFile") and doc.get("basicAuth"):
        raise UtilizationConfigError(f"{where}: bearerTokenFile and basicAuth: one of them")
    if doc.get("bearerTokenFile"):
        headers["Authorization"] = "Bearer " + _secret(doc["bearerTokenFile"], where)
    if doc.get("basicAuth"):
        auth = _mapping(doc, "basicAuth", where)
        _known(auth, {"username", "passwordFile"}, f"{where}: basicAuth")
        if not auth.get("username") or not auth.get("passwordFile"):
            raise UtilizationConfigError(f"{where}: basicAuth: username and passwordFile")
        pair = f"{auth['username']}:{_secret(auth['passwordFile'], where)}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
    selector = str(doc.get("selector") or "").strip()
    if "{" in selector or "}" in selector:
        raise UtilizationConfigError(f"{where}: selector: label matchers without braces")
    labels = _mapping(doc, "labels", where)
    _known(labels, set(_LABEL_KEYS), f"{where}: labels")
    names = LabelNames(**{_LABEL_KEYS[k]: str(v) for k, v in labels.items()})
    timeout = _number(doc.get("timeoutSeconds", 10), f"{where}: timeoutSeconds", positive=True)
    return PrometheusTarget(str(url).rstrip("/"), headers, selector, timeout, names)


def _secret(path: Any, where: str) -> str:
    try:
        return Path(str(path)).read_text().strip()
    except OSError as error:
        raise UtilizationConfigError(f"{where}: {path}: cannot read ({error.strerror})") from None


def _mapping(doc: dict, key: str, where: str) -> dict:
    value = doc.get(key) or {}
    if not isinstance(value, dict):
        raise UtilizationConfigError(f"{where}: {key}: must be a mapping")
    return value


def _known(doc: dict, keys: set[str], where: str) -> None:
    unknown = sorted(set(map(str, doc)) - keys)
    if unknown:
        raise UtilizationConfigError(
            f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(keys))})"
        )


def _number(value: Any, where: str, *, top: float | None = None, positive: bool = False) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    ok = ok and (value > 0 if positive else value >= 0) and (top is None or value <= top)
    if not ok:
        bound = f"0-{top:g}" if top is not None else ("> 0" if positive else ">= 0")
        raise UtilizationConfigError(f"{where}: must be a number {bound}")
    return float(value)
