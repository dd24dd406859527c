"""DeviceClass ⇄ Device: there is no stored link, so evaluate the class's CEL selectors.

A device belongs to a class when every selector of the class matches it (DeviceClass
`spec.selectors`: "all selectors must be satisfied"; the rule is the model's,
`service.model.class_members.class_accepts`).
Selectors are compiled once per expression by `service.diagnostics.cel` (cached there) and the
verdict for each (class, device) pair is memoized per request. A selector that fails to
compile or to evaluate on a device counts as "no match" here — the graph answers "which
classes offer this device", and `explainClaim` is where selector errors are reported.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from dra_mirror.service.diagnostics.cel import SelectorError, compile_selector
from dra_mirror.service.model.class_members import class_accepts
from dra_mirror.service.model.records import Device, DeviceClassRecord, DeviceEntry

from .loaders import Loaders

log = logging.getLogger(__name__)


def class_matches(loaders: Loaders, device_class: DeviceClassRecord, entry: DeviceEntry) -> bool:
    """Do all of the class's selectors accept the device? (memoized per request)"""
    memo_key = ("class-match", device_class.meta.cluster, device_class.meta.name, entry.key)
    verdict = loaders.memo.get(memo_key)
    if verdict is None:
        verdict = loaders.memo[memo_key] = _evaluate(device_class, entry)
    return verdict


def _evaluate(device_class: DeviceClassRecord, entry: DeviceEntry) -> bool:
    def matcher(expression: str, device: Device, driver: str) -> bool:
        try:
            return compile_selector(expression).matches(device, driver)
        except SelectorError as error:
            log.debug(
                "class selector does not evaluate on %s: %s",
                entry.key.ref(),
                error,
                extra={
                    "cluster": device_class.meta.cluster,
                    "kind": "DeviceClass",
                    "name": device_class.meta.name,
                },
            )
            return False

    return class_accepts(device_class, entry, matcher)


async def classes_of(loaders: Loaders, entry: DeviceEntry) -> list[DeviceClassRecord]:
    """The device classes of the device's cluster whose selectors accept it, by name."""
    classes = await loaders.cluster_classes.load(entry.key.cluster)
    found = [c for c in classes if class_matches(loaders, c, entry)]
    return sorted(found, key=lambda c: c.meta.name)


def devices_of(
    loaders: Loaders, device_class: DeviceClassRecord, entries: Sequence[DeviceEntry]
) -> list[DeviceEntry]:
    """The entries (of the class's cluster) the class's selectors accept."""
    cluster = device_class.meta.cluster
    return [
        e for e in entries if e.key.cluster == cluster and class_matches(loaders, device_class, e)
    ]
