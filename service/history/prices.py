"""The chargeback price table: one file, read and checked at start.

    DRA_MIRROR_HISTORY_PRICES=/etc/dra-mirror/prices.yaml   (unset: hours without costs)

```yaml
currency: EUR                    # what every price is in (required)
default: 2.0                     # per GPU-hour, for a hold no entry below prices (required)
models:                          # per GPU-hour, by the model the device published
  NVIDIA H100 80GB HBM3: 4.5     # (its productName, else model/product attribute)
classes:                         # per GPU-hour, by the DeviceClass the claim requested,
  gpu.nvidia.com: 3.0            # for holds whose model has no price
teamLabel: team                  # the namespace label naming a namespace's team (default team)
namespaceLabels:                 # namespaces' labels, as known: `cluster/namespace` or
  ml-train: {team: ml}           # `namespace` (every cluster); the mirror does not watch
  east/serving: {team: ml}       # Namespaces, so this is where it learns them
```

A hold is priced by its model, else its class, else the default (`price`). A namespace's team
is the value of `teamLabel` among its labels (the `cluster/namespace` entry first, then the
`namespace` one), else `(unlabelled)` (`team`). Every mistake — an unknown key, a negative or
non-numeric price, a missing currency — raises `PricesError` naming the place, so a mirror with
a bad file refuses to start (exit 2). Pure but for `load`, which reads the file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dra_mirror.service.settings_values import read_yaml

UNLABELLED = "(unlabelled)"
_TOP_KEYS = {"currency", "default", "models", "classes", "teamLabel", "namespaceLabels"}


class PricesError(ValueError):
    """The price table is wrong; the message says where and why."""


@dataclass(frozen=True)
class PriceTable:
    currency: str
    default: float  # per GPU-hour
    models: Mapping[str, float] = field(default_factory=dict)
    classes: Mapping[str, float] = field(default_factory=dict)
    team_label: str = "team"
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def price(self, model: str, class_name: str) -> float:
        """Per GPU-hour of a hold on a device of `model` for `class_name`."""
        if model in self.models:
            return self.models[model]
        if class_name in self.classes:
            return self.classes[class_name]
        return self.default

    def team(self, cluster: str, namespace: str) -> str:
        """The namespace's `teamLabel` label where known, else `(unlabelled)`."""
        for key in (f"{cluster}/{namespace}", namespace):
            labels = self.namespace_labels.get(key)
            if labels is not None and labels.get(self.team_label):
                return labels[self.team_label]
        return UNLABELLED


def load(path: str | None) -> PriceTable | None:
    """The file at `path`, checked; None when no path is given."""
    if not path:
        return None
    return parse(read_yaml(path, PricesError), where=path)


def parse(doc: Any, *, where: str = "prices") -> PriceTable:
    """A parsed document, checked."""
    if not isinstance(doc, dict):
        raise PricesError(f"{where}: must be a mapping with currency and default")
    unknown = sorted(set(map(str, doc)) - _TOP_KEYS)
    if unknown:
        raise PricesError(
            f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_TOP_KEYS))})"
        )
    currency = doc.get("currency")
    if not isinstance(currency, str) or not currency.strip():
        raise PricesError(f"{where}: currency: required, e.g. EUR or USD")
    if "default" not in doc:
        raise PricesError(f"{where}: default: required, the price per GPU-hour of any hold")
    team_label = doc.get("teamLabel", "team")
    if not isinstance(team_label, str) or not team_label.strip():
        raise PricesError(f"{where}: teamLabel: must be a label name, e.g. team")
    labels: dict[str, dict[str, str]] = {}
    for namespace, found in _mapping(doc, "namespaceLabels", where).items():
        place = f"{where}: namespaceLabels.{namespace}"
        if not isinstance(found, dict):
            raise PricesError(f"{place}: must map label names to values")
        labels[str(namespace)] = {str(k): str(v) for k, v in found.items() if v is not None}
    return PriceTable(
        currency=currency.strip(),
        default=_price(doc["default"], f"{where}: default"),
        models=_prices(doc, "models", where),
        classes=_prices(doc, "classes", where),
        team_label=team_label.strip(),
        namespace_labels=labels,
    )


def _mapping(doc: dict, key: str, where: str) -> dict:
    value = doc.get(key) or {}
    if not isinstance(value, dict):
        raise PricesError(f"{where}: {key}: must be a mapping")
    return value


def _prices(doc: dict, key: str, where: str) -> dict[str, float]:
    return {str(name): _price(value, f"{where}: {key}.{name}")
            for name, value in _mapping(doc, key, where).items()}  # fmt: skip


def _price(value: Any, where: str) -> float:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or value < 0:
        raise PricesError(f"{where}: must be a number >= 0 (per GPU-hour), not {value!r}")
    return float(value)
