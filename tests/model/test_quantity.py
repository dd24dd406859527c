from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dra_mirror.service.model.quantity import format_quantity, parse_quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("143771Mi", 143771 * 1024**2),
        ("80Gi", 80 * 1024**3),
        ("1.5", Fraction(3, 2)),
        ("100m", Fraction(1, 10)),
        ("1e3", 1000),
        ("5E-2", Fraction(5, 100)),
        ("16", 16),
        ("0", 0),
        (".5", Fraction(1, 2)),
        ("-2Ki", -2048),
        ("+3k", 3000),
        ("2M", 2_000_000),
        ("1n", Fraction(1, 10**9)),
        ("7u", Fraction(7, 10**6)),
        ("1Ei", 1024**6),
    ],
)
def test_parse(text: str, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("bad", ["", "Gi", "1.2.3", "1 Gi", "1gi", "abc", "1e", "--1", "1Kb"])
def test_parse_rejects(bad: str) -> None:
    with pytest.raises(ValueError, match="not a quantity"):
        parse_quantity(bad)


def test_parse_numbers_from_yaml() -> None:
    assert parse_quantity(10) == 10
    assert parse_quantity(1.5) == Fraction(3, 2)


@pytest.mark.parametrize(
    ("value", "like", "text"),
    [
        (143771 * 1024**2, "80Gi", "143771Mi"),
        (80 * 1024**3, "1Mi", "80Gi"),
        (Fraction(3, 2), None, "1500m"),
        (1000, None, "1k"),
        (0, "10Gi", "0"),
        (1500, "1Ki", "1500"),  # not a multiple of 1024: plain number
        (Fraction(1, 3), None, "333333334n"),  # rounded up at nano precision
        (-2048, "1Ki", "-2Ki"),
        (Fraction(5, 2), "1Gi", "2500m"),  # binary cannot hold a fraction
    ],
)
def test_format(value: Fraction, like: str | None, text: str) -> None:
    assert format_quantity(value, like=like) == text


@given(
    st.integers(min_value=-(10**20), max_value=10**20),
    st.sampled_from([None, "1Gi", "1", "100m"]),
)
def test_format_round_trips_nanos(nanos: int, like: str | None) -> None:
    value = Fraction(nanos, 10**9)
    assert parse_quantity(format_quantity(value, like=like)) == value
