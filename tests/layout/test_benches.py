"""The benchmarks are not run by the suite, but each must at least load: a change of the
package they read (a kind added, a name moved) breaks them silently otherwise."""

from __future__ import annotations

import importlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_benchmark_module_loads() -> None:
    names = sorted(p.stem for p in (ROOT / "bench").glob("*.py") if p.stem != "__init__")
    assert len(names) > 10
    failures = {}
    for name in names:
        try:
            importlib.import_module(f"bench.{name}")
        except Exception as error:  # every failure is reported by name
            failures[name] = f"{type(error).__name__}: {error}"
    assert failures == {}
