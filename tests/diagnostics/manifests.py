"""Scenario pieces (raw manifests as the simulator's scenario files take them) shared by the
diagnostics tests that stage the operations manual's rows in a simulated cluster."""

from __future__ import annotations

from typing import Any

A100 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100 80GB PCIe'"
H100 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"


def template(name: str, device_class: str, *selectors: str) -> dict[str, Any]:
    """A ResourceClaimTemplate in namespace `ops` asking for one device of `device_class`."""
    exactly: dict[str, Any] = {"deviceClassName": device_class}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "ops"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
    }


def workload(name: str, template_name: str) -> dict[str, Any]:
    """A scenario workload in `ops` whose pod claims one device through `template_name`."""
    return {
        "name": name,
        "namespace": "ops",
        "claims": [{"name": "gpu", "resourceClaimTemplateName": template_name}],
    }
