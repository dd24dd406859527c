"""Kubernetes `resource.Quantity`, exactly: parse to a Fraction, format back to a quantity string.

Promises:

* `parse_quantity` accepts every form the API server accepts — a signed decimal number with an
  optional binary-SI suffix (`Ki Mi Gi Ti Pi Ei`), decimal-SI suffix (`n u m k M G T P E`) or
  decimal exponent (`1e3`, `5E-2`) — and returns its exact value; anything else raises
  `ValueError` (never silently 0);
* `format_quantity(v, like=...)` writes a value in the format family of `like` (binary SI when
  `like` uses a binary suffix, else decimal SI), the way the API server canonicalizes: the
  largest suffix that keeps the number an integer; values below 1n round up to 1n (Kubernetes
  rounds up too, so a remaining capacity is never reported smaller than it is);
* `parse_quantity(format_quantity(v)) == v` for every value that is a whole number of nanos.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

_BINARY = {"Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4, "Pi": 1024**5, "Ei": 1024**6}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
# Largest first, for formatting.
_BINARY_DESC = sorted(_BINARY.items(), key=lambda item: -item[1])
_DECIMAL_DESC = sorted(_DECIMAL.items(), key=lambda item: -item[1])

# Kubernetes' grammar: <sign><digits>[.<digits>]<suffix>, suffix one of the SI forms or an
# exponent. ".5" and "5." are accepted by the API server.
_QUANTITY = re.compile(
    r"^(?P<sign>[+-]?)(?P<number>\d+\.?\d*|\.\d+)"
    r"(?:(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?\d+)|(?P<decimal>[numkMGTPE]?))$"
)


def parse_quantity(s: str | int | float) -> Fraction:
    """The exact value of a Kubernetes quantity string ("143771Mi", "1.5", "100m", "1e3")."""
    if isinstance(s, bool):
        raise ValueError(f"not a quantity: {s!r}")
    if isinstance(s, int):
        return Fraction(s)
    if isinstance(s, float):
        return Fraction(str(s))
    text = s.strip()
    match = _QUANTITY.match(text)
    if match is None:
        raise ValueError(f"not a quantity: {s!r}")
    value = Fraction(match["number"])
    if match["binary"]:
        value *= _BINARY[match["binary"]]
    elif match["exp"]:
        value *= Fraction(10) ** int(match["exp"][1:])
    else:
        value *= _DECIMAL[match["decimal"] or ""]
    return -value if match["sign"] == "-" else value


def is_binary(quantity: str | None) -> bool:
    """True when a quantity string uses a binary-SI suffix (Ki, Mi, …)."""
    return quantity is not None and quantity[-2:] in _BINARY


def format_quantity(v: Fraction | int, like: str | None = None) -> str:
    """`v` as a quantity string, in the format family of `like` (binary if `like` is binary)."""
    v = Fraction(v)
    if v == 0:
        return "0"
    sign = "-" if v < 0 else ""
    v = abs(v)
    if like is not None and is_binary(like) and v.denominator == 1:
        n = v.numerator
        for suffix, factor in _BINARY_DESC:
            if n % factor == 0:
                return f"{sign}{n // factor}{suffix}"
        return f"{sign}{n}"
    # Decimal SI: Kubernetes keeps nano precision and rounds up below it.
    nanos = math.ceil(v * 10**9)
    for suffix, scale in _DECIMAL_DESC:
        scaled = Fraction(nanos, 10**9) / scale
        if scaled.denominator == 1:
            return f"{sign}{scaled.numerator}{suffix}"
    return f"{sign}{nanos}n"  # unreachable: every nano count is an integer of "n"
