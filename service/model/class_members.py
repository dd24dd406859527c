"""Which devices each DeviceClass selects: the rule, and the membership an index keeps.

A DeviceClass's `spec.selectors` "must be satisfied for a device which is claimed via this
class" (resource/v1 DeviceClassSpec): a device belongs to a class when every selector of the
class accepts it, and to a class without selectors in any case. A selector that does not
compile or fails on a device does not accept it — the graph answers "which classes offer this
device"; explainClaim is where selector errors are reported. `class_accepts(cls, entry,
matcher)` is that rule, for everyone who asks it (the graph's filters, the stores, the index).

`ClassMembers` keeps, for an index whose store lives outside the process (Redis), the classes
of every device of a valid pool generation (published: the devices a class can offer), and
reports what each batch changed as `IndexDelta.classes` ((class, device) -> member or not, net
per entry). Promises:

* when a batch settles, every device whose entry it changed is matched again against every
  class of the cluster, and every class it created, changed or deleted is matched against
  every device (O(devices) per class event: classes are few and rarely change);
* a device that leaves its valid pool leaves every class; a deleted class loses every member;
* it keeps one set of class names per device, the same object for devices of the same
  classes: memory is a dictionary entry per device.

The CEL engine is not the model's: the matcher is passed in (`taint_rules.SelectorMatcher`,
service.diagnostics.cel.rule_selector_matches).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from dra_mirror.service.model.records import DeviceClassRecord, DeviceEntry, DeviceKey, Record
from dra_mirror.service.model.taint_rules import SelectorMatcher

ClassDelta = dict[tuple[str, DeviceKey], bool]  # (class name, device) -> member now


def class_accepts(
    device_class: DeviceClassRecord, entry: DeviceEntry, matcher: SelectorMatcher
) -> bool:
    """Does the class offer the device? Every selector must accept it (see the module
    docstring)."""
    device, driver = entry.device, entry.key.driver
    return all(matcher(expression, device, driver) for expression in device_class.selectors)


class ClassMembers:
    """The classes of each published device (see the module docstring)."""

    def __init__(self, matcher: SelectorMatcher) -> None:
        self._matcher = matcher
        self._classes: dict[str, DeviceClassRecord] = {}
        self._of: dict[DeviceKey, frozenset[str]] = {}
        self._shared: dict[frozenset[str], frozenset[str]] = {}  # one object per set of names
        self._changed_classes: set[str] = set()

    @classmethod
    def kept(cls, wanted: bool, matcher: SelectorMatcher | None) -> ClassMembers | None:
        """The members an index keeps when `wanted` (None: it keeps none)."""
        if not wanted:
            return None
        if matcher is None:
            raise ValueError("class members need a selector matcher")
        return cls(matcher)

    def on_record(self, old: Record | None, new: Record | None) -> None:
        """Any record changed: a DeviceClass is matched again at settle."""
        if isinstance(old, DeviceClassRecord | None) and isinstance(new, DeviceClassRecord | None):
            self.on_class(old, new)

    def classes_of(self, key: DeviceKey) -> frozenset[str]:
        return self._of.get(key, frozenset())

    def memberships(self) -> Iterator[tuple[str, DeviceKey]]:
        """Every (class name, device) pair of a class offering a device, as of now."""
        for key, names in self._of.items():
            for name in names:
                yield name, key

    def on_class(self, old: DeviceClassRecord | None, new: DeviceClassRecord | None) -> None:
        """A class was created, changed or deleted: matched against every device at settle."""
        current = new if new is not None else old
        assert current is not None
        name = current.meta.name
        if new is None:
            self._classes.pop(name, None)
        else:
            self._classes[name] = new
        self._changed_classes.add(name)

    def settle(
        self,
        devices: Mapping[DeviceKey, DeviceEntry],
        changed: Iterable[DeviceKey],
        delta: ClassDelta,
    ) -> None:
        """Match what the batch changed (classes, then `changed` devices: their entry in
        `devices`, absent when no longer valid) and record the net changes in `delta`."""
        for name in sorted(self._changed_classes):
            device_class = self._classes.get(name)
            for key, entry in devices.items():
                member = device_class is not None and class_accepts(
                    device_class, entry, self._matcher
                )
                self._set(key, name, member, delta)
            if device_class is None:  # devices gone since: nothing of them may stay
                for key in [k for k, names in self._of.items() if name in names]:
                    self._set(key, name, False, delta)
        self._changed_classes.clear()
        classes = self._classes
        for key in changed:
            now = devices.get(key)
            before = self._of.get(key, frozenset())
            if now is None:
                after: frozenset[str] = frozenset()
            else:
                after = frozenset(
                    name
                    for name, device_class in classes.items()
                    if class_accepts(device_class, now, self._matcher)
                )
            if after == before:
                continue
            for name in before - after:
                delta[(name, key)] = False
            for name in after - before:
                delta[(name, key)] = True
            self._store(key, after)

    def _set(self, key: DeviceKey, name: str, member: bool, delta: ClassDelta) -> None:
        before = self._of.get(key, frozenset())
        if (name in before) == member:
            return
        self._store(key, before | {name} if member else before - {name})
        delta[(name, key)] = member

    def _store(self, key: DeviceKey, names: frozenset[str]) -> None:
        if not names:
            self._of.pop(key, None)
            return
        self._of[key] = self._shared.setdefault(names, names)
