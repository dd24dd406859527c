"""The vendored browser assets: where they are, which versions, and whether they are intact.

`static/vendor/vendor.json` pins each npm package (version, license, tarball sha512, one
sha256 per file); `scripts/vendor-web` re-fetches them for a person upgrading. This module
reads that manifest for the pages (`vendor_url`) and for the tests (`damaged`): the product
serves exactly the committed files and never fetches anything.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePosixPath

STATIC = Path(__file__).with_name("static")
VENDOR = STATIC / "vendor"


@dataclass(frozen=True)
class VendoredPackage:
    name: str
    version: str
    license: str
    integrity: str  # sha512 of the npm tarball
    files: dict[str, str]  # path in the tarball -> sha256 of the file

    @property
    def directory(self) -> str:
        """Its folder under static/vendor: `@scope/name` 1.2.3 is `scope-name-1.2.3`."""
        return f"{self.name.lstrip('@').replace('/', '-')}-{self.version}"

    def served(self) -> dict[str, str]:
        """Path under static/ -> pinned sha256, for every file of the package."""
        return {
            f"vendor/{self.directory}/{PurePosixPath(source).name}": digest
            for source, digest in self.files.items()
        }


@cache
def packages() -> tuple[VendoredPackage, ...]:
    manifest = json.loads((VENDOR / "vendor.json").read_text())
    return tuple(
        VendoredPackage(
            name=p["name"],
            version=p["version"],
            license=p["license"],
            integrity=p["integrity"],
            files=dict(p["files"]),
        )
        for p in manifest["packages"]
    )


def package(name: str) -> VendoredPackage:
    for found in packages():
        if found.name == name:
            return found
    raise KeyError(name)


def vendor_path(name: str, filename: str) -> str:
    """`vendor/<dir>/<filename>` of a pinned package's file (KeyError when not pinned)."""
    pinned = package(name)
    path = f"vendor/{pinned.directory}/{filename}"
    if path not in pinned.served():
        raise KeyError(f"{name}: {filename} is not pinned")
    return path


def sha256(data: bytes) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(data).digest()).decode()


def damaged() -> list[str]:
    """Vendored files that are missing or differ from their pin (empty when intact)."""
    problems = []
    for pinned in packages():
        for path, digest in pinned.served().items():
            file = STATIC / path
            if not file.is_file():
                problems.append(f"{path}: missing")
            elif sha256(file.read_bytes()) != digest:
                problems.append(f"{path}: differs from its pinned sha256")
    return problems
