"""Field errors as kube-apiserver reports them, and the formats and limits they check.

A `Checker` collects `StatusCause`-shaped dicts (`{reason, message, field}`) with the reasons
and messages of k8s.io/apimachinery's `field.ErrorList` (`FieldValueRequired`,
`FieldValueTooMany`, `FieldValueInvalid` …); values are quoted as Go's `%q` prints them. The
formats are apimachinery's (RFC 1123 labels and subdomains, C identifiers, label names and
values, semantic versions); the limits are those of k8s.io/api resource/v1 (1.35), the
constants its types.go declares (`ResourceSliceMaxDevices`,
`ResourceSliceMaxAttributesAndCapacitiesPerDevice`…).

Promises: pure; a checker never raises for a value of the wrong type, it reports it.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = [
    "C_IDENTIFIER",
    "DNS_LABEL",
    "DNS_SUBDOMAIN",
    "LABEL_NAME",
    "LABEL_VALUE",
    "MAX_ATTRIBUTES_AND_CAPACITIES",
    "MAX_ATTRIBUTE_VALUE",
    "MAX_CEL_LENGTH",
    "MAX_CONFIGS",
    "MAX_CONSTRAINTS",
    "MAX_CONSUMES_COUNTERS",
    "MAX_COUNTERS_PER_SET",
    "MAX_COUNTER_SETS",
    "MAX_DEVICES",
    "MAX_DEVICES_WITH_TAINTS_OR_COUNTERS",
    "MAX_REQUESTS",
    "MAX_RESERVED_FOR",
    "MAX_RESULTS",
    "MAX_SELECTORS",
    "MAX_SUBREQUESTS",
    "MAX_TAINTS",
    "SEMVER",
    "Causes",
    "Checker",
    "label",
    "quoted",
]

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(-((0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(\.(0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(\+([0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*))?$"
)

# Limits from k8s.io/api resource/v1 (1.35).
MAX_DEVICES = 128
MAX_DEVICES_WITH_TAINTS_OR_COUNTERS = 64
MAX_ATTRIBUTES_AND_CAPACITIES = 32
MAX_COUNTER_SETS = 8
MAX_COUNTERS_PER_SET = 32
MAX_CONSUMES_COUNTERS = 2
MAX_TAINTS = 16
MAX_REQUESTS = 32
MAX_SUBREQUESTS = 8
MAX_SELECTORS = 32
MAX_CONSTRAINTS = 32
MAX_CONFIGS = 32
MAX_RESULTS = 32
MAX_RESERVED_FOR = 256
MAX_CEL_LENGTH = 10 * 1024
MAX_ATTRIBUTE_VALUE = 64

Causes = list[dict[str, str]]


def quoted(value: Any) -> str:
    """A value as Go's %q prints it in field errors ("nameValue", not 'nameValue')."""
    return json.dumps(value, default=str)


class Checker:
    def __init__(self) -> None:
        self.causes: Causes = []

    def add(self, field: str, message: str, reason: str = "FieldValueInvalid") -> None:
        self.causes.append({"reason": reason, "message": message, "field": field})

    def required(self, field: str, value: Any) -> bool:
        if value in (None, "", [], {}):
            self.add(field, "Required value", "FieldValueRequired")
            return False
        return True

    def too_many(self, field: str, items: Any, limit: int) -> None:
        if items is not None and len(items) > limit:
            self.add(
                field,
                f"Too many: {len(items)}: must have at most {limit} items",
                "FieldValueTooMany",
            )

    def dns_label(self, field: str, value: Any) -> None:
        if self.required(field, value) and (
            not isinstance(value, str) or len(value) > 63 or not DNS_LABEL.match(value)
        ):
            self.add(field, f"Invalid value: {quoted(value)}: must be a lowercase RFC 1123 label")

    def dns_subdomain(self, field: str, value: Any, limit: int = 253) -> None:
        if self.required(field, value) and (
            not isinstance(value, str) or len(value) > limit or not DNS_SUBDOMAIN.match(value)
        ):
            self.add(
                field, f"Invalid value: {quoted(value)}: must be a lowercase RFC 1123 subdomain"
            )

    def qualified_name(self, field: str, value: str) -> None:
        """Attribute/capacity keys: C identifier ≤32, optionally `<dns subdomain ≤63>/`."""
        domain, _, ident = value.rpartition("/")
        if domain and (len(domain) > 63 or not DNS_SUBDOMAIN.match(domain)):
            self.add(field, f"Invalid value: {quoted(value)}: the domain must be a DNS subdomain")
        if len(ident) > 32 or not C_IDENTIFIER.match(ident):
            self.add(
                field, f"Invalid value: {quoted(value)}: must be a C identifier of ≤32 characters"
            )

    def one_of(self, field: str, present: list[str]) -> None:
        if not present:
            self.add(
                field, "Required value: exactly one of the fields must be set", "FieldValueRequired"
            )
        elif len(present) > 1:
            self.add(field, f"Invalid value: {present}: exactly one field must be set")

    def selectors(self, field: str, selectors: Any) -> None:
        self.too_many(field, selectors, MAX_SELECTORS)
        for i, sel in enumerate(selectors or []):
            expr: Any = ((sel or {}).get("cel") or {}).get("expression")
            if self.required(f"{field}[{i}].cel.expression", expr) and len(expr) > MAX_CEL_LENGTH:
                self.add(f"{field}[{i}].cel.expression", "Too long", "FieldValueTooLong")


def label(c: Checker, field: str, key: str, value: Any) -> None:
    prefix, _, label = key.rpartition("/")
    if prefix and not DNS_SUBDOMAIN.match(prefix):
        c.add(f"{field}", f"Invalid value: {quoted(key)}: prefix must be a DNS subdomain")
    if len(label) > 63 or not LABEL_NAME.match(label):
        c.add(f"{field}", f"Invalid value: {quoted(key)}: name part must be a valid label name")
    if not isinstance(value, str) or len(value) > 63 or not LABEL_VALUE.match(value):
        c.add(f"{field}", f"Invalid value: {quoted(value)}: a valid label value")
