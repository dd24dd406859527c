"""Records of DeviceTaintRules, re-exported by `service.model.records`.

`TaintRuleRecord` keeps a rule's device selector (`TaintSelector`), its taint as written and its
conditions; `RuleTaint` is the taint a rule puts on a device it selects
(`service.model.taint_rules` reads the wire and applies the rules). Immutable msgspec Structs
without reference cycles, as every record (see `service.model.records`).
"""

from __future__ import annotations

from typing import Any

from msgspec import Struct

from dra_mirror.service.model.identity import Meta


# spec.deviceSelector: every criterion set must match (service.model.taint_rules);
# `device_class_name` and `selectors` (CEL expressions) are served by 1.33/1.34 only.
class TaintSelector(Struct, frozen=True, gc=False):
    driver: str | None = None
    pool: str | None = None
    device: str | None = None
    device_class_name: str | None = None
    selectors: tuple[str, ...] = ()


class TaintRuleRecord(Struct, frozen=True, gc=False, tag="DeviceTaintRule"):
    meta: Meta
    selector: TaintSelector | None  # None: the rule selects no device
    taint: dict[str, Any]  # the raw DeviceTaint (key, value, effect, timeAdded)
    conditions: tuple[dict[str, Any], ...] = ()  # raw status.conditions (EvictionInProgress)


class RuleTaint(Struct, frozen=True, gc=False):  # the taint a rule puts on a device it selects
    rule: str  # the rule's name (DeviceTaintRule is cluster-scoped)
    taint: dict[str, Any]
