"""The vendored browser assets are what their pins say, each package ships its license, and
the pages and modules load only files of the package."""

from __future__ import annotations

import re

from dra_mirror.service.web import assets
from dra_mirror.service.web.pages import graphiql_page, screens_page

LICENSE = re.compile(r"^LICEN[CS]E(\.md|\.txt)?$")


def test_every_vendored_file_matches_its_pin() -> None:
    assert assets.damaged() == []
    assert len(assets.packages()) >= 6


def test_every_vendored_package_ships_its_license() -> None:
    for package in assets.packages():
        names = [path.rsplit("/", 1)[1] for path in package.served()]
        assert any(LICENSE.match(name) for name in names), package.name
        assert package.license and package.integrity.startswith("sha512-"), package.name


def test_a_changed_file_is_reported(tmp_path, monkeypatch) -> None:
    copy = tmp_path / "static"
    for path in assets.STATIC.rglob("*"):
        if path.is_file() and "/vendor/" in path.as_posix():
            target = copy / path.relative_to(assets.STATIC)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    react = copy / assets.vendor_path("react", "react.production.min.js")
    react.write_bytes(react.read_bytes() + b"\n")
    monkeypatch.setattr(assets, "STATIC", copy)
    assert assets.damaged() == [
        f"{assets.vendor_path('react', 'react.production.min.js')}: differs from its pinned sha256"
    ]


def local_references(text: str) -> list[str]:
    return re.findall(r"""(?:src|href)="([^"]+)\"""", text)


def test_pages_load_only_files_of_the_package() -> None:
    for page in (screens_page(), graphiql_page()):
        references = local_references(page)
        assert references
        for reference in references:
            assert reference.startswith(("/ui/static/", "data:")), reference
            if reference.startswith("/ui/static/"):
                assert (assets.STATIC / reference.removeprefix("/ui/static/")).is_file(), reference
        assert "://" not in page.replace("http://www.w3.org", "")


def test_modules_import_only_pinned_vendor_files() -> None:
    pinned = {path for package in assets.packages() for path in package.served()}
    modules = sorted((assets.STATIC / "app").rglob("*.js"))
    assert modules
    for module in modules:
        text = module.read_text()
        for found in re.findall(r"""["'](?:\.\./)+(vendor/[^"']+)["']""", text):
            assert found in pinned, f"{module.name}: {found}"
        assert not re.search(r"""\bimport\b[^;]*["']https?://""", text), module.name
        for imported in re.findall(r"""from\s+["'](\.[^"']+)["']""", text):
            assert (module.parent / imported).resolve().is_file(), f"{module.name}: {imported}"
