"""Every CEL expression in ../shared/fixtures/upstream (DeviceClass and request selectors, and
the NVIDIA class selectors quoted in SOURCES.md) against devices that must and must not match.

The expressions are extracted from the files, not copied: a fixture that gains an expression
this table does not cover fails `test_every_upstream_expression_is_covered`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from dra_mirror.service.diagnostics.cel import SelectorError, compile_selector
from dra_mirror.service.model.records import Attribute, Capacity, DeviceEntry
from tests.diagnostics.builders import NIC, NVIDIA, attrs, entry

EXAMPLE = "gpu.example.com"
DOMAIN = "compute-domain.nvidia.com"


def _walk(node: Any, out: list[str]) -> None:
    if isinstance(node, dict):
        cel = node.get("cel")
        if isinstance(cel, dict) and "expression" in cel:
            out.append(cel["expression"])
        for value in node.values():
            _walk(value, out)
    elif isinstance(node, list):
        for value in node:
            _walk(value, out)


def upstream_expressions(directory: Path) -> list[str]:
    found: list[str] = []
    for path in sorted(directory.iterdir()):
        if path.suffix in (".yaml", ".json"):
            for doc in yaml.safe_load_all(path.read_text()):
                _walk(doc, found)
    sources = (directory / "SOURCES.md").read_text()
    for span in re.findall(r"`(device\.[^`]*)`", sources):
        if "==" in span and "…" not in span:
            found.append(span)
    return list(dict.fromkeys(found))


def _example_gpu(model: str = "LATEST-GPU-MODEL", memory: str = "80Gi") -> DeviceEntry:
    return entry(
        "gpu-0",
        driver=EXAMPLE,
        attributes=attrs(
            EXAMPLE,
            model=model,
            index=0,
            uuid="gpu-18db0e85-99e9-c746-8531-ffeb86328b39",
            driverVersion=Attribute("version", "1.0.0"),
        ),
        capacity={f"{EXAMPLE}/memory": Capacity(memory)},
    )


def _mig(profile: str, multiprocessors: str = "16", memory: str = "16Gi") -> DeviceEntry:
    return entry(
        f"gpu-0-mig-{profile.replace('.', '')}-0",
        attributes=attrs(NVIDIA, type="mig", profile=profile, parentUUID="GPU-0"),
        capacity={
            f"{NVIDIA}/multiprocessors": Capacity(multiprocessors),
            f"{NVIDIA}/memory": Capacity(memory),
        },
    )


def _nvidia(kind: str, driver: str = NVIDIA) -> DeviceEntry:
    return entry(f"{kind}-0", driver=driver, attributes=attrs(driver, type=kind))


def _channel(channel_id: int) -> DeviceEntry:
    return entry(
        f"channel-{channel_id}",
        driver=DOMAIN,
        attributes=attrs(DOMAIN, type="channel", id=channel_id),
    )


def _nic(interface: str, driver: str = NIC) -> DeviceEntry:
    return entry(
        f"{interface}-dev",
        driver=driver,
        node="n1",
        attributes=attrs(driver, interfaceName=interface),
    )


# expression -> (devices that match, devices that do not)
CASES: dict[str, tuple[list[DeviceEntry], list[DeviceEntry]]] = {
    'device.driver == "cni.dra.networking.x-k8s.io"': ([_nic("eth0")], [_nic("eth0", "other.io")]),
    'device.attributes["cni.dra.networking.x-k8s.io"].interfaceName == "eth0"': (
        [_nic("eth0")],
        [_nic("eth1")],
    ),
    "device.attributes['gpu.example.com'].model == 'BLEEDING-EDGE-GPU'": (
        [_example_gpu("BLEEDING-EDGE-GPU")],
        [_example_gpu()],
    ),
    "device.capacity['gpu.example.com'].memory.compareTo(quantity('1Ti')) >= 0": (
        [_example_gpu(memory="1Ti"), _example_gpu(memory="1025Gi"), _example_gpu(memory="2T")],
        [_example_gpu(memory="80Gi"), _example_gpu(memory="1023Gi"), _example_gpu(memory="1T")],
    ),
    "device.attributes['gpu.example.com'].model == 'LATEST-GPU-MODEL'": (
        [_example_gpu()],
        [_example_gpu("BLEEDING-EDGE-GPU")],
    ),
    "device.capacity['gpu.nvidia.com'].multiprocessors.isGreaterThan(quantity(\"10\"))\n&&\n"
    "device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity(\"10Gi\"))\n": (
        # H200 1g.18gb: 16 SMs, 16 GiB; A100 1g.5gb: 14 SMs, 4864Mi; 10 SMs is not > 10.
        [_mig("1g.18gb"), _mig("3g.71gb", "60", "69.75Gi")],
        [_mig("1g.5gb", "14", "4864Mi"), _mig("1g.18gb", "10", "16Gi")],
    ),
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig' "
    "&& device.attributes['gpu.nvidia.com'].profile == '1g.12gb'": (
        [_mig("1g.12gb")],
        [_mig("1g.24gb"), _nvidia("gpu", driver=EXAMPLE)],
    ),
    "device.attributes['gpu.nvidia.com'].profile == '1g.5gb'": (
        [_mig("1g.5gb")],
        [_mig("2g.10gb")],
    ),
    "device.attributes['gpu.nvidia.com'].profile == '2g.10gb'": (
        [_mig("2g.10gb")],
        [_mig("1g.5gb")],
    ),
    "device.attributes['gpu.nvidia.com'].profile == '3g.20gb'": (
        [_mig("3g.20gb")],
        [_mig("3g.40gb")],
    ),
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'": (
        [_nvidia("gpu")],
        [_nvidia("mig"), _nvidia("vfio"), _nvidia("daemon", DOMAIN)],
    ),
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'": (
        [_nvidia("mig"), _mig("1g.18gb")],
        [_nvidia("gpu"), _nvidia("vfio")],
    ),
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'vfio'": (
        [_nvidia("vfio")],
        [_nvidia("gpu"), _nvidia("mig")],
    ),
    "device.driver == 'compute-domain.nvidia.com' "
    "&& device.attributes['compute-domain.nvidia.com'].type == 'daemon'": (
        [_nvidia("daemon", DOMAIN)],
        [_channel(0), _nvidia("gpu")],
    ),
    "device.driver == 'compute-domain.nvidia.com' "
    "&& device.attributes['compute-domain.nvidia.com'].type == 'channel' "
    "&& device.attributes['compute-domain.nvidia.com'].id == 0": (
        [_channel(0)],
        [_channel(1), _nvidia("daemon", DOMAIN), _nvidia("gpu")],
    ),
    "device.driver == 'gpu.example.com'": ([_example_gpu()], [_nvidia("gpu")]),
}

# The kubernetes/api round-trip files hold a placeholder; it is an undeclared identifier.
NOT_COMPILING = {"expressionValue"}


@pytest.fixture(scope="module")
def expressions(shared_dir: Path) -> list[str]:
    return upstream_expressions(shared_dir / "fixtures" / "upstream")


def test_every_upstream_expression_is_covered(expressions: list[str]) -> None:
    assert len(expressions) >= 15
    assert set(expressions) == set(CASES) | NOT_COMPILING


@pytest.mark.parametrize("expression", sorted(CASES))
def test_upstream_expression_matches(expression: str) -> None:
    selector = compile_selector(expression)
    matching, other = CASES[expression]
    assert [selector.matches(e.device, e.key.driver) for e in matching] == [True] * len(matching)
    assert [selector.matches(e.device, e.key.driver) for e in other] == [False] * len(other)


def test_placeholder_expression_is_a_compile_error() -> None:
    with pytest.raises(SelectorError) as raised:
        compile_selector("expressionValue")
    assert "undeclared reference to 'expressionValue'" in raised.value.message
    assert raised.value.expression == "expressionValue"
