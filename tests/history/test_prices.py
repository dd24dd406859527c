"""The chargeback's price table: what it accepts, how it prices and names teams, and the one
clear line for each mistake."""

from __future__ import annotations

from pathlib import Path

import pytest

from dra_mirror.service.history.prices import UNLABELLED, PricesError, load, parse
from dra_mirror.service.runtime.configuration import ConfigurationError, prices_config
from dra_mirror.service.settings import Settings

GOOD = {
    "currency": "EUR", "default": 1, "models": {"NVIDIA H200": 4.0},
    "classes": {"gpu.nvidia.com": 2}, "teamLabel": "owner",
    "namespaceLabels": {"ml": {"owner": "research"}, "west/ml": {"owner": "west-ml"},
                        "web": {"team": "web"}},
}  # fmt: skip


def test_a_hold_is_priced_by_model_then_class_then_default() -> None:
    table = parse(GOOD)
    assert table.price("NVIDIA H200", "gpu.nvidia.com") == 4.0
    assert table.price("NVIDIA L4", "gpu.nvidia.com") == 2.0
    assert table.price("NVIDIA L4", "other") == 1.0
    assert table.price("", "") == 1.0


def test_a_team_is_the_namespace_label_where_known() -> None:
    table = parse(GOOD)
    assert table.team("east", "ml") == "research"
    assert table.team("west", "ml") == "west-ml"  # cluster/namespace first
    assert table.team("east", "web") == UNLABELLED  # labels known, not the team label
    assert table.team("east", "other") == UNLABELLED
    assert parse({"currency": "USD", "default": 0}).team_label == "team"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"currency": None}, "currency: required"),
        ({"currency": " "}, "currency: required"),
        ({"default": None}, "default: must be a number >= 0"),
        ({"default": -1}, "default: must be a number >= 0"),
        ({"default": True}, "default: must be a number >= 0"),
        ({"default": float("nan")}, "default: must be a number >= 0"),
        ({"models": {"H100": "cheap"}}, "models.H100: must be a number >= 0"),
        ({"classes": ["gpu"]}, "classes: must be a mapping"),
        ({"teamLabel": ""}, "teamLabel: must be a label name"),
        ({"namespaceLabels": {"ml": "research"}}, "namespaceLabels.ml: must map label names"),
        ({"price": 1}, "unknown key 'price'"),
    ],
)
def test_each_mistake_is_one_clear_line(change, message) -> None:
    with pytest.raises(PricesError, match=message.replace(".", r"\.")):
        parse({**GOOD, **change})
    missing = dict(GOOD)
    del missing["default"]
    with pytest.raises(PricesError, match="default: required"):
        parse(missing)


def test_the_file_named_by_the_setting_is_checked_at_start(tmp_path: Path) -> None:
    assert prices_config(Settings()) is None
    good = tmp_path / "prices.yaml"
    good.write_text("currency: EUR\ndefault: 2.5\n")
    settings = Settings.from_env({"history.prices": str(good)}, environ={})
    assert prices_config(settings) == load(str(good))
    assert load(str(good)).default == 2.5
    bad = tmp_path / "bad.yaml"
    bad.write_text("currency: EUR\n")
    with pytest.raises(ConfigurationError, match=r"^prices: .*bad.yaml: default: required"):
        prices_config(Settings.from_env({"history.prices": str(bad)}, environ={}))
    with pytest.raises(ConfigurationError, match="cannot read"):
        prices_config(Settings.from_env({"history.prices": str(tmp_path / "no")}, environ={}))
    env = Settings.from_env(environ={"DRA_MIRROR_HISTORY_PRICES": str(good)})
    assert env.history.prices == str(good)
