"""The utilisation file: what it accepts, and a clear error naming the place for the rest."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from click.testing import CliRunner

from dra_mirror.service.cli.main import main
from dra_mirror.service.model.dcgm import LabelNames
from dra_mirror.service.utilization.config import UtilizationConfigError, load, parse


def test_a_full_file(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    config = parse(
        {
            "busyBelow": 10,
            "notBusyAfterMinutes": 120,
            "stepSeconds": 30,
            "pricePerKwh": 0.12,
            "clusters": {
                "east": {
                    "url": "http://prom:9090/",
                    "bearerTokenFile": str(token),
                    "headers": {"X-Scope-OrgID": "gpu"},
                    "selector": 'cluster="east"',
                    "labels": {"uuid": "gpu_uuid"},
                },
                "west": {"url": "https://prom.west"},
            },
        }
    )
    assert (config.busy_below, config.not_busy_after, config.step) == (10, 7200, 30)
    assert config.price_per_kwh == 0.12
    east = config.clusters["east"]
    assert east.url == "http://prom:9090"
    assert east.headers == {"X-Scope-OrgID": "gpu", "Authorization": "Bearer s3cret"}
    assert east.labels == LabelNames(uuid="gpu_uuid")
    assert "s3cret" not in repr(east)
    assert config.clusters["west"].labels == LabelNames()


def test_defaults_and_basic_auth(tmp_path: Path) -> None:
    password = tmp_path / "password"
    password.write_text("pw")
    config = parse(
        {
            "clusters": {
                "east": {
                    "url": "http://prom:9090",
                    "basicAuth": {"username": "mirror", "passwordFile": str(password)},
                }
            }
        }
    )
    assert (config.busy_below, config.not_busy_after, config.step) == (5, 1800, 60)
    assert config.price_per_kwh is None
    expected = "Basic " + base64.b64encode(b"mirror:pw").decode()
    assert config.clusters["east"].headers["Authorization"] == expected
    assert load(None) is None


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "utilization: must be a mapping"),
        ({"clusters": {}}, "clusters: must map cluster names"),
        ({"clusters": {"e": {"url": "ftp://x"}}}, "clusters.e: url: must be an http(s) URL"),
        ({"clusters": {"e": {"url": "http://x", "colour": 1}}}, "clusters.e: unknown key 'colour'"),
        (
            {"busyBelow": 150, "clusters": {"e": {"url": "http://x"}}},
            "busyBelow: must be a number 0-100",
        ),
        (
            {"stepSeconds": 0, "clusters": {"e": {"url": "http://x"}}},
            "stepSeconds: must be a number > 0",
        ),
        (
            {"clusters": {"e": {"url": "http://x", "selector": "{a=1}"}}},
            "selector: label matchers without braces",
        ),
        (
            {"clusters": {"e": {"url": "http://x", "labels": {"gpu": "g"}}}},
            "labels: unknown key 'gpu'",
        ),
        (
            {"clusters": {"e": {"url": "http://x", "bearerTokenFile": "/nonexistent/t"}}},
            "/nonexistent/t: cannot read",
        ),
    ],
)
def test_mistakes_are_named(doc, message: str) -> None:
    with pytest.raises(
        UtilizationConfigError, match=message.replace("(", r"\(").replace(")", r"\)")
    ):
        parse(doc)


def test_a_bad_file_stops_serve_with_status_2(tmp_path: Path) -> None:
    bad = tmp_path / "utilization.yaml"
    bad.write_text("clusters: {east: {url: nowhere}}\n")
    result = CliRunner().invoke(
        main,
        ["serve", "--insecure-no-auth", "--port", "0"],
        env={"DRA_MIRROR_UTILIZATION_CONFIG": str(bad), "KUBECONFIG": str(tmp_path / "none")},
    )
    assert result.exit_code == 2, result.output
    assert "utilization: " in result.output and "url: must be an http(s) URL" in result.output
