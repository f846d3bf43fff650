"""Resource quantities (``100m``, ``1Gi``, ``2e3``) as integers, apimachinery's way.

A quantity is parsed once into an exact :class:`~fractions.Fraction` and read
either as a plain integer (bytes, counts: rounded *up*, as ``Quantity.Value``)
or in thousandths (cpu: ``Quantity.MilliValue``, rounded up too). Invalid text
raises ``ValueError`` with upstream's message, so a caller can turn it into a
Status error.

No I/O; results are cached because the same few strings (``100m``, ``1Gi``)
recur in every pod.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

__all__ = ["parse_quantity", "quantity_value", "quantity_milli_value", "format_milli_quantity"]

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
            "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
            "P": Fraction(10**15), "E": Fraction(10**18)}
_RE = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$")


@functools.lru_cache(maxsize=4096)
def _parse_text(text: str) -> Fraction:
    m = _RE.match(text.strip())
    if not m:
        raise ValueError(f"quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {text!r}")
    number = Fraction(m.group(1))
    suffix = m.group(2) or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    return number * Fraction(10) ** int(suffix[1:])


def parse_quantity(value: str | int | float) -> Fraction:
    """The exact value of a quantity (a JSON number is taken as is)."""
    if isinstance(value, bool):
        raise ValueError(f"a quantity must be a string or a number, not {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(value)
    return _parse_text(str(value))


def quantity_value(value: str | int | float) -> int:
    """Whole units, rounded up (``Quantity.Value``): ``1Ki`` -> 1024, ``0.5`` -> 1."""
    if isinstance(value, str):
        return _value_of_text(value)
    return math.ceil(parse_quantity(value))


def quantity_milli_value(value: str | int | float) -> int:
    """Thousandths, rounded up (``Quantity.MilliValue``): ``100m`` -> 100, ``2`` -> 2000."""
    if isinstance(value, str):
        return _milli_of_text(value)
    return math.ceil(parse_quantity(value) * 1000)


# the same few strings recur in every pod: remember their integer readings
@functools.lru_cache(maxsize=4096)
def _value_of_text(text: str) -> int:
    return math.ceil(_parse_text(text))


@functools.lru_cache(maxsize=4096)
def _milli_of_text(text: str) -> int:
    return math.ceil(_parse_text(text) * 1000)


_DECIMAL_SUFFIX = {-3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


def format_milli_quantity(milli: int) -> str:
    """A count of thousandths in canonical DecimalSI form, as
    ``resource.NewMilliQuantity(v, DecimalSI).String()``: 1500 -> ``1500m``,
    2000 -> ``2``, 3_000_000 -> ``3k``, 0 -> ``0``."""
    if milli == 0:
        return "0"
    sign, n, exponent = ("-" if milli < 0 else ""), abs(milli), -3
    while n % 1000 == 0 and exponent < 18:
        n //= 1000
        exponent += 3
    return f"{sign}{n}{_DECIMAL_SUFFIX[exponent]}"
