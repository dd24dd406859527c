"""The GraphQL documents the screens send, read from the screens' own modules.

Every document the screens send is a module-level constant of one of `static/app`'s modules,
a template literal that may splice in other such constants (fragments) by name, from its own
module or imported from another:

    export const DEVICE_FIELDS = `fragment SliceDevice on Device { … }`;
    const DEVICES = `query Devices(…) { devices(…) { nodes { ...SliceDevice } } }
    ${DEVICE_FIELDS}`;

`screen_documents()` gives each operation (a constant whose text starts with `query`,
`subscription` or `mutation`, after `#` comments) with its splices resolved, exactly as the
browser sends it: the server registers them as persisted queries of its own
(`service.http.registered`), so the screens work on a server that runs only registered
documents. A splice of anything but such a constant is a `ValueError` (the screens' browser
tests then fail): a document built at run time could not be registered.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from .assets import STATIC

APP = STATIC / "app"
_CONSTANT = re.compile(r"^(?:export\s+)?const\s+([A-Z][A-Z0-9_]*)\s*=\s*`([^`]*)`;", re.M | re.S)
_IMPORT = re.compile(r"^import\s*\{([^}]*)\}\s*from\s*\"(\./|\.\./)([^\"]+)\";", re.M)
_SPLICE = re.compile(r"\$\{([^}]*)\}")
_OPERATION = re.compile(r"^(?:\s*#[^\n]*\n)*\s*(query|subscription|mutation)\b")


class _Module:
    def __init__(self, path: Path) -> None:
        text = path.read_text(encoding="utf-8")
        self.path = path
        self.constants = dict(_CONSTANT.findall(text))
        self.imports: dict[str, Path] = {}
        for names, relative, target in _IMPORT.findall(text):
            source = (path.parent / relative / target).resolve()
            for name in names.split(","):
                parts = name.split(" as ")
                self.imports[parts[-1].strip()] = source
                if len(parts) == 2:  # `A as B`: B here is A there
                    self.imports[f"{parts[1].strip()}:original"] = Path(parts[0].strip())


def _resolve(modules: dict[Path, _Module], module: _Module, name: str, depth: int = 0) -> str:
    if depth > 10:
        raise ValueError(f"{module.path.name}: {name} splices itself")
    if name in module.constants:
        text = module.constants[name]

        def splice(match: re.Match[str]) -> str:
            inner = match.group(1).strip()
            if not re.fullmatch(r"[A-Z][A-Z0-9_]*", inner):
                raise ValueError(f"{module.path.name}: {name} splices {inner!r}, not a constant")
            return _resolve(modules, module, inner, depth + 1)

        return _SPLICE.sub(splice, text)
    source = module.imports.get(name)
    if source is None or source not in modules:
        raise ValueError(f"{module.path.name}: {name} is neither a constant nor imported")
    original = module.imports.get(f"{name}:original")
    return _resolve(modules, modules[source], str(original) if original else name, depth + 1)


@cache
def screen_documents(app: Path = APP) -> tuple[tuple[str, str], ...]:
    """(module:constant, text) of every operation the screens send, in module order."""
    modules = {p.resolve(): _Module(p) for p in sorted(app.rglob("*.js"))}
    found = []
    for path, module in modules.items():
        for name, text in module.constants.items():
            if _OPERATION.match(text):
                label = f"{path.relative_to(app.resolve()).as_posix()}:{name}"
                found.append((label, _resolve(modules, module, name)))
    return tuple(found)
