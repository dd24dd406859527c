"""Compare the CEL libraries on PyPI for device selectors: correctness and speed.

    .venv/bin/pip install cel-python common-expression-language   # the two not chosen
    .venv/bin/python bench/cel_compare.py [--devices 40000]

Candidates:

* cel-expr-python  — Google's cel-cpp behind pybind11 (the one dra-mirror uses);
* cel-python       — `celpy`, a pure-Python interpreter on lark;
* common-expression-language — `cel`, the Rust `cel-interpreter` crate behind PyO3.

Each gets the same Kubernetes extensions (quantity(), semver(), compareTo, isGreaterThan,
isLessThan over the same one-entry-map values `service.diagnostics.cel_library` uses) and the
same device inputs (`service.diagnostics.cel.device_data`). Correctness: every upstream
expression of `tests/diagnostics/test_cel_upstream.py` (the fixtures and SOURCES.md) against
its matching and non-matching devices, plus the environment checks below (cel.bind,
lowerAscii, has() on an unknown domain, a missing attribute being an error). Speed: the
two-clause NVIDIA class selector over N devices, inputs prebuilt, evaluation only.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cel_select import CLASS_SELECTOR, make_devices
from dra_mirror.service.diagnostics import cel_library
from dra_mirror.service.diagnostics.cel import SelectorError, compile_selector, device_data
from tests.diagnostics.builders import gpu
from tests.diagnostics.test_cel_upstream import CASES

# (expression, expected on an H200 record; None = must be an evaluation error)
ENVIRONMENT = [
    ("cel.bind(g, device.attributes['gpu.nvidia.com'], g.type == 'gpu')", True),
    ("device.attributes['gpu.nvidia.com'].productName.lowerAscii() == 'nvidia h200'", True),
    ("device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('580.0.0'))", True),
    ("!has(device.attributes['unknown.example.com'].x)", True),
    ("device.attributes['gpu.nvidia.com'].profile == '1g.18gb'", None),
]

Evaluator = Callable[[str], Callable[[dict[str, Any]], Any]]


def _k8s_functions(wrap_int: Callable[[int], Any], wrap_bool: Callable[[bool], Any]):
    compare = cel_library._compare
    return {
        "quantity": lambda s: cel_library.quantity_value(str(s)),
        "semver": lambda s: cel_library.semver_value(str(s)),
        "compareTo": lambda a, b: wrap_int(compare(dict(a), dict(b))),
        "isGreaterThan": lambda a, b: wrap_bool(compare(dict(a), dict(b)) > 0),
        "isLessThan": lambda a, b: wrap_bool(compare(dict(a), dict(b)) < 0),
    }


def cel_expr_python() -> Evaluator:
    def build(expression: str):
        program = compile_selector(expression)._program

        def run(data: dict[str, Any]) -> Any:
            result = program.eval(data={"device": data})
            value = result.value()
            return value if isinstance(value, bool) else RuntimeError(str(value))

        return run

    return build


def cel_python() -> Evaluator:
    import celpy
    from celpy import celtypes

    env = celpy.Environment()
    functions = _k8s_functions(celtypes.IntType, celtypes.BoolType)

    def build(expression: str):
        program = env.program(env.compile(expression), functions=functions)

        def run(data: dict[str, Any]) -> Any:
            return bool(program.evaluate({"device": celpy.json_to_cel(data)}))

        return run

    return build


def common_expression_language() -> Evaluator:
    import cel

    functions = _k8s_functions(int, bool)

    def build(expression: str):
        program = cel.compile(expression)

        def run(data: dict[str, Any]) -> Any:
            return program.execute(cel.Context(variables={"device": data}, functions=functions))

        return run

    return build


def correctness(build: Evaluator) -> tuple[int, int, list[str]]:
    passed = total = 0
    failures: list[str] = []
    checks: list[tuple[str, Any, Any]] = []
    for expression, (matching, other) in CASES.items():
        checks += [(expression, e, True) for e in matching] + [
            (expression, e, False) for e in other
        ]
    h200 = gpu(0)
    checks += [(expression, h200, expected) for expression, expected in ENVIRONMENT]
    for expression, entry, expected in checks:
        total += 1
        try:
            compile_selector(expression)  # registers the domains the expression indexes
            got: Any = build(expression)(device_data(entry.device, entry.key.driver))
        except (SelectorError, Exception) as e:
            got = e
        ok = isinstance(got, Exception) if expected is None else got is expected
        if ok:
            passed += 1
        else:
            failures.append(f"{expression.strip()[:70]!r}: expected {expected}, got {got!r:.80}")
    return passed, total, failures


def speed(build: Evaluator, inputs: list[dict[str, Any]], budget_s: float = 20.0) -> float:
    run = build(CLASS_SELECTOR)
    start = time.perf_counter()
    done = 0
    for data in inputs:
        run(data)
        done += 1
        if done % 1000 == 0 and time.perf_counter() - start > budget_s:
            break
    return done / (time.perf_counter() - start)


def main(n: int) -> None:
    inputs = [device_data(e.device, e.key.driver) for e in make_devices(n)]
    for name, factory in (
        ("cel-expr-python", cel_expr_python),
        ("cel-python", cel_python),
        ("common-expression-language", common_expression_language),
    ):
        try:
            build = factory()
        except ImportError as e:
            print(f"{name}: not installed ({e})")
            continue
        passed, total, failures = correctness(build)
        rate = speed(build, inputs)
        print(f"{name}: correct {passed}/{total}; {rate:,.0f} evals/s; {n / rate:.2f} s per {n:,}")
        for failure in failures:
            print(f"    {failure}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=40_000)
    main(parser.parse_args().devices)
