"""Flag value types the components' command lines share, read as upstream's Go flags read them."""

from __future__ import annotations

import argparse

__all__ = ["go_bool"]


def go_bool(text: str) -> bool:
    """``--flag=true|false`` as Go's flag package reads booleans."""
    value = text.strip().lower()
    if value in ("1", "t", "true", "yes"):
        return True
    if value in ("0", "f", "false", "no"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not a boolean: use true or false")
