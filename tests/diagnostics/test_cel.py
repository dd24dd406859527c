"""The Kubernetes CEL environment for device selectors: typed attributes, Quantity, semver,
string extensions, cel.bind, unknown domains, and errors reported as errors."""

from __future__ import annotations

import pytest

from dra_mirror.service.diagnostics.cel import SelectorError, SelectorEvalError, compile_selector
from dra_mirror.service.model.records import Attribute, Capacity
from tests.diagnostics.builders import NVIDIA, attrs, entry, gpu

H200 = gpu(0)
NIC = entry(
    "eth1",
    driver="cni.dra.networking.x-k8s.io",
    shareable=True,
    attributes=attrs("cni.dra.networking.x-k8s.io", interfaceName="eth1", mtu=9000, sriov=True),
    capacity={
        "cni.dra.networking.x-k8s.io/bandwidth": Capacity(
            "10G", {"default": "1G", "validValues": ["1G", "5G", "10G"]}
        )
    },
)
LISTS = entry(
    "list-dev",
    attributes={
        f"{NVIDIA}/ints": Attribute("ints", [1, 2, 3]),
        f"{NVIDIA}/versions": Attribute("versions", ["1.0.0", "2.0.0"]),
    },
)
UNQUALIFIED_DRIVER_DOMAIN = entry("raw", attributes={"model": Attribute("string", "x")})


def evaluate(expression: str, device=H200) -> bool:
    return compile_selector(expression).matches(device.device, device.key.driver)


TRUE = [
    # typed attributes
    "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'",
    "device.attributes['gpu.nvidia.com'].architecture in ['Hopper', 'Blackwell']",
    "device.attributes['cni.dra.networking.x-k8s.io'].mtu > 1500",
    "device.attributes['cni.dra.networking.x-k8s.io'].sriov",
    # versions are semvers
    "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('580.0.0'))",
    "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('580.159.4')) == 0",
    "device.attributes['gpu.nvidia.com'].driverVersion == semver('580.159.4')",
    "device.attributes['gpu.nvidia.com'].cudaComputeCapability.isLessThan(semver('10.0.0'))",
    "device.attributes['gpu.nvidia.com'].cudaComputeCapability.major() == 9",
    "device.attributes['gpu.nvidia.com'].driverVersion.minor() == 159",
    "device.attributes['gpu.nvidia.com'].driverVersion.patch() == 4",
    "semver('1.0.0-alpha').isLessThan(semver('1.0.0-alpha.1'))",
    "semver('1.0.0-alpha.1').isLessThan(semver('1.0.0-beta'))",
    "semver('1.0.0-rc.1').isLessThan(semver('1.0.0'))",
    "semver('v9.0', true) == semver('9.0.0')",
    "isSemver('1.2.3') && !isSemver('v1.2.3') && isSemver('v1.2', true)",
    # capacities are Quantities
    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('140Gi')) >= 0",
    "device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('80Gi'))",
    "device.capacity['gpu.nvidia.com'].memory.isLessThan(quantity('141Gi'))",
    "device.capacity['gpu.nvidia.com'].memory == quantity('143771Mi')",
    "quantity('1Gi') == quantity('1024Mi')",
    "quantity('1.5') == quantity('1500m')",
    "device.capacity['gpu.nvidia.com'].memory.add(quantity('1Mi')) == quantity('143772Mi')",
    "device.capacity['gpu.nvidia.com'].memory.sub(quantity('143770Mi')) == quantity('1Mi')",
    "quantity('10').add(5) == quantity('15') && quantity('10').sub(15).sign() == -1",
    "device.capacity['gpu.nvidia.com'].memory.asInteger() == 143771 * 1024 * 1024",
    "quantity('500m').asApproximateFloat() == 0.5 && !quantity('500m').isInteger()",
    "isQuantity('16Gi') && !isQuantity('16 Gi')",
    # the rest of the environment
    "device.driver == 'gpu.nvidia.com' && !device.allowMultipleAllocations",
    "device.attributes['gpu.nvidia.com'].productName.lowerAscii().contains('h200')",
    "device.attributes['gpu.nvidia.com'].uuid.startsWith('GPU-')",
    "device.attributes['gpu.nvidia.com'].productName.split(' ')[1] == 'H200'",
    "cel.bind(g, device.attributes['gpu.nvidia.com'], g.type == 'gpu' && g.architecture == 'Hopper')",
    "has(device.attributes['gpu.nvidia.com'].uuid)",
    "!has(device.attributes['gpu.nvidia.com'].profile)",
    "!has(device.attributes['other.example.com'].anything)",
    "'gpu.nvidia.com' in device.attributes",
]


@pytest.mark.parametrize("expression", TRUE)
def test_true_on_an_h200_or_a_nic(expression: str) -> None:
    device = NIC if "cni.dra" in expression else H200
    assert evaluate(expression, device) is True


@pytest.mark.parametrize(
    "expression",
    [
        "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100'",
        "device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('141Gi'))",
        "device.attributes['gpu.nvidia.com'].driverVersion.isLessThan(semver('580.159.4'))",
        "device.allowMultipleAllocations",
    ],
)
def test_false(expression: str) -> None:
    assert evaluate(expression) is False


def test_shareable_device_and_list_attributes() -> None:
    assert evaluate("device.allowMultipleAllocations", NIC)
    assert evaluate("2 in device.attributes['gpu.nvidia.com'].ints", LISTS)
    assert evaluate(
        "device.attributes['gpu.nvidia.com'].versions.exists(v, v.isGreaterThan(semver('1.5.0')))",
        LISTS,
    )


def test_unqualified_keys_belong_to_the_driver_domain() -> None:
    assert evaluate("device.attributes['gpu.nvidia.com'].model == 'x'", UNQUALIFIED_DRIVER_DOMAIN)


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        (
            "device.attributes['gpu.nvidia.com'].profile == '1g.18gb'",
            'Key not found in map : "profile"',
        ),
        ("device.attributes['unknown.example.com'].x == 1", 'Key not found in map : "x"'),
        (
            "device.capacity['gpu.nvidia.com'].memory.compareTo(semver('1.0.0')) > 0",
            "Quantity with a Semver",
        ),
        ("quantity('sixteen') == quantity('16')", "not a quantity"),
        ("semver('1.2') == semver('1.2.0')", "invalid semver"),
        ("device.attributes['gpu.nvidia.com'].productName > 1", "No matching overload"),
        ("device.driver", "must evaluate to bool"),
    ],
)
def test_evaluation_errors_are_errors_not_false(expression: str, fragment: str) -> None:
    selector = compile_selector(expression)
    with pytest.raises(SelectorEvalError) as raised:
        selector.matches(H200.device, H200.key.driver)
    assert fragment in raised.value.message
    assert raised.value.expression == expression


def test_short_circuit_hides_an_error_like_kubernetes() -> None:
    # CEL's && and || are commutative over errors: false && error is false.
    assert (
        evaluate("device.driver == 'x' && device.attributes['gpu.nvidia.com'].nope == 1") is False
    )
    assert evaluate("device.attributes['gpu.nvidia.com'].nope == 1 || true") is True


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("device.driver ==", "Syntax error"),
        ("nosuchfunction(device.driver)", "undeclared reference to 'nosuchfunction'"),
        ("1 + 2", "must evaluate to bool, not INT"),
        ("quantity(16) == quantity('16')", "no matching overload for 'quantity'"),
    ],
)
def test_compile_errors(expression: str, fragment: str) -> None:
    with pytest.raises(SelectorError) as raised:
        compile_selector(expression)
    assert not isinstance(raised.value, SelectorEvalError)
    assert fragment in raised.value.message


def test_compiled_once_per_expression() -> None:
    text = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
    assert compile_selector(text) is compile_selector(text)
    with pytest.raises(SelectorError) as first:
        compile_selector("device.driver ==")
    with pytest.raises(SelectorError) as second:
        compile_selector("device.driver ==")
    assert first.value is second.value


def test_a_domain_first_seen_after_a_device_was_cached() -> None:
    device = gpu(7)
    assert evaluate("device.driver == 'gpu.nvidia.com'", device)
    # A new expression names a domain no earlier one did: the cached input must learn it.
    assert evaluate("!has(device.attributes['brand-new.example.com'].x)", device)
    assert evaluate("!has(device.capacity['brand-new2.example.com'].x)", device)


def test_a_new_version_of_a_device_is_evaluated_afresh() -> None:
    selector = compile_selector("device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'")
    before = gpu(3)
    after = entry("gpu-3", attributes=attrs(NVIDIA, productName="NVIDIA B200"))
    assert selector.matches(before.device, NVIDIA) is True
    assert selector.matches(after.device, NVIDIA) is False
    assert selector.matches(before.device, NVIDIA) is True
    # An error is remembered as an error, not as False.
    bare = entry("gpu-4", attributes=attrs(NVIDIA, type="gpu"))
    for _ in range(2):
        with pytest.raises(SelectorEvalError):
            selector.matches(bare.device, NVIDIA)


@pytest.mark.parametrize(
    "expression",
    [
        "cel.bind(g, device.attributes['gpu.nvidia.com'], g.type == 'gpu')",
        "'gpu.nvidia.com' in device.attributes",
        "device.driver == 'device'",
        "device.attributes['gpu.nvidia.com'].exists(k, k == 'type')",
    ],
)
def test_selectors_reading_more_than_literal_references_are_not_projected(expression: str) -> None:
    from dra_mirror.service.diagnostics.cel import _projection

    assert _projection(expression) is None


def test_projected_answers_equal_full_evaluation() -> None:
    expression = (
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
        " && device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('80Gi'))"
    )
    selector = compile_selector(expression)
    devices = [
        gpu(0),
        gpu(1),
        entry("mig", attributes=attrs(NVIDIA, type="mig")),
        entry(
            "small",
            attributes=attrs(NVIDIA, type="gpu"),
            capacity={f"{NVIDIA}/memory": Capacity("40Gi")},
        ),
        entry("bare", attributes=attrs(NVIDIA, type="gpu")),  # no memory: an error
        entry("other", driver="gpu.example.com", attributes=attrs("gpu.example.com", type="gpu")),
        entry(
            "raw",
            attributes={"type": Attribute("string", "gpu")},
            capacity={"memory": Capacity("1Ti")},
        ),
    ]
    for device in devices * 2:
        full = selector.evaluate(device.device, device.key.driver)
        try:
            projected: object = selector.matches(device.device, device.key.driver)
        except SelectorEvalError as e:
            projected = e
        if isinstance(full, SelectorEvalError):
            assert isinstance(projected, SelectorEvalError) and projected.message == full.message
        else:
            assert projected is full
    assert [selector.evaluate(d.device, d.key.driver) for d in devices[:2]] == [True, True]
    assert selector.matches(devices[-1].device, NVIDIA) is True


def test_select_over_many_devices_equals_full_evaluation() -> None:
    # `select` reads each device's projection inline (keyed by the attribute records, or by
    # their values when a value is a list): its split must be evaluate()'s, device by device.
    expression = (
        "device.attributes['gpu.nvidia.com'].type == 'gpu' && "
        "2 in device.attributes['gpu.nvidia.com'].ints && "
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0"
    )
    selector = compile_selector(expression)
    devices = [
        entry(
            f"d{i}",
            attributes={
                f"{NVIDIA}/type": Attribute("string", "gpu" if i % 3 else "mig"),
                f"{NVIDIA}/ints": Attribute("ints", [1, i % 4]),
            },
            capacity={f"{NVIDIA}/memory": Capacity("80Gi" if i % 5 else "40Gi")},
        )
        for i in range(24)
    ]
    devices.append(entry("untyped", attributes=attrs(NVIDIA, type="gpu")))  # no ints: an error
    for _ in range(2):  # answered afresh, then from what the first pass remembered
        passing, failed = selector.select(devices)
        expected = [selector.evaluate(d.device, d.key.driver) for d in devices]
        assert [d.key.device for d in passing] == [
            d.key.device for d, answer in zip(devices, expected, strict=True) if answer is True
        ]
        assert [d.key.device for d, _ in failed] == ["untyped"]
        assert [d.key.device for d in passing] == ["d2", "d14", "d22"]


NUMA = "resource.kubernetes.io/numaNode"
NUMA_INT = entry("numa-int", attributes={NUMA: Attribute("int", 1)})  # DRAListTypeAttributes off
NUMA_LIST = entry("numa-list", attributes={NUMA: Attribute("ints", [1])})  # on: one element
NUMA_SPREAD = entry("numa-spread", attributes={NUMA: Attribute("ints", [6, 4, 5, 7])})


@pytest.mark.parametrize(
    ("expression", "devices"),
    [
        ("device.attributes['resource.kubernetes.io'].numaNode.includes(1)", {"numa-int", "numa-list"}),
        ("device.attributes['resource.kubernetes.io'].numaNode.includes(4)", {"numa-spread"}),
        ("device.attributes['resource.kubernetes.io'].numaNode.includes(0)", set()),
    ],
)  # fmt: skip
def test_includes_reads_numa_node_as_an_int_or_a_list(expression: str, devices: set[str]) -> None:
    """KEP-6072: resource.kubernetes.io/numaNode is an int, or an `ints` list where list
    attributes are on (NVIDIA's driver: a one-element list); KEP-5491's `includes()` reads
    either form, so one selector serves clusters with the gate on and off."""
    found = {d.device.name for d in (NUMA_INT, NUMA_LIST, NUMA_SPREAD) if evaluate(expression, d)}
    assert found == devices


def test_includes_of_every_attribute_type_and_a_type_mismatch_is_an_error() -> None:
    assert evaluate("device.attributes['gpu.nvidia.com'].productName.includes('NVIDIA H200')")
    assert evaluate("device.attributes['gpu.nvidia.com'].versions.includes(semver('2.0.0'))", LISTS)
    assert not evaluate("device.attributes['gpu.nvidia.com'].ints.includes(4)", LISTS)
    assert evaluate("device.attributes['cni.dra.networking.x-k8s.io'].sriov.includes(true)", NIC)
    with pytest.raises(SelectorEvalError, match="No matching overload"):
        evaluate("device.attributes['resource.kubernetes.io'].numaNode.includes('1')", NUMA_INT)
