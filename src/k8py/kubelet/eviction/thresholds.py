"""Eviction thresholds as the kubelet's flags write them.

``--eviction-hard=memory.available<100Mi,nodefs.available<10%`` and ``--eviction-soft`` with
``--eviction-soft-grace-period=memory.available=1m30s``; a KubeletConfiguration's
``evictionHard``/``evictionSoft``/``evictionSoftGracePeriod`` maps are the same pairs. The
only operator is ``<`` (LessThan), as upstream. A quantity is bytes (``100Mi``), a count for
inodes and pids (``1000``), or a percentage of the signal's capacity (``10%``).

Each signal belongs to one resource (what the eviction message names and the ranking
measures) and one node condition:

=====================  ==================  ==============
signal                 resource            condition
=====================  ==================  ==============
memory.available       memory              MemoryPressure
nodefs.available       ephemeral-storage   DiskPressure
nodefs.inodesFree      inodes              DiskPressure
imagefs.available      ephemeral-storage   DiskPressure
imagefs.inodesFree     inodes              DiskPressure
pid.available          pids                PIDPressure
=====================  ==================  ==============

Upstream's Linux defaults apply when neither flag nor file sets any hard threshold
(:data:`DEFAULT_HARD`). ``--eviction-minimum-reclaim=memory.available=500Mi`` keeps a met
threshold met until that much more than its amount is free (so one eviction is not followed
by the same pressure at once). Bad input raises ValueError saying what to write instead.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Mapping

__all__ = ["Threshold", "SIGNALS", "DEFAULT_HARD", "parse_thresholds", "parse_grace_periods", "parse_pairs", "flag_map", "configured_thresholds"]

#: signal -> (resource, node condition)
SIGNALS: Mapping[str, tuple[str, str]] = {
    "memory.available": ("memory", "MemoryPressure"),
    "nodefs.available": ("ephemeral-storage", "DiskPressure"),
    "nodefs.inodesFree": ("inodes", "DiskPressure"),
    "imagefs.available": ("ephemeral-storage", "DiskPressure"),
    "imagefs.inodesFree": ("inodes", "DiskPressure"),
    "pid.available": ("pids", "PIDPressure"),
}

DEFAULT_HARD = "memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%"

_BYTES = {"Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4, "Pi": 1024**5, "k": 1000, "K": 1000, "M": 1000**2,
          "G": 1000**3, "T": 1000**4, "P": 1000**5}


@dataclass(frozen=True)
class Threshold:
    signal: str
    #: an absolute amount (bytes, inodes or pids), or None when ``percentage`` is set
    quantity: int | None
    #: a fraction of the capacity (0.1 for ``10%``)
    percentage: float | None = None
    #: how long a soft threshold must hold before it evicts (0 for hard ones)
    grace_period: float = 0.0
    hard: bool = True
    #: ``--eviction-minimum-reclaim``: once met, the threshold holds until this much more is free
    min_reclaim: int | None = None
    min_reclaim_percentage: float | None = None

    @property
    def resource(self) -> str:
        return SIGNALS[self.signal][0]

    @property
    def condition(self) -> str:
        return SIGNALS[self.signal][1]

    def amount(self, capacity: int) -> int:
        """The threshold in the signal's unit, for a node with ``capacity``."""
        if self.quantity is not None:
            return self.quantity
        return int(capacity * (self.percentage or 0.0))

    def reclaim(self, capacity: int) -> int:
        """What must be free beyond :meth:`amount` before a met threshold counts as relieved."""
        if self.min_reclaim is not None:
            return self.min_reclaim
        return int(capacity * (self.min_reclaim_percentage or 0.0))


def _quantity(text: str, signal: str) -> int:
    s = text.strip()
    for suffix in sorted(_BYTES, key=len, reverse=True):
        if s.endswith(suffix):
            try:
                return int(float(s[: -len(suffix)]) * _BYTES[suffix])
            except ValueError:
                break
    try:
        return int(float(s))
    except ValueError:
        raise ValueError(f"eviction threshold {signal}<{text}: {text!r} is not a quantity; write bytes (100Mi), "
                         "a count (1000) or a percentage (10%)") from None


def parse_pairs(text: str) -> list[tuple[str, str, str]]:
    """``a<1,b=2`` → [(a, "<", 1), (b, "=", 2)] (the caller checks the operator)."""
    out = []
    for item in filter(None, (x.strip() for x in text.split(","))):
        op = next((o for o in ("<", "=") if o in item), None)
        if op is None:
            raise ValueError(f"eviction setting {item!r} has no operator: write signal<quantity (memory.available<100Mi) "
                             "or, for a grace period, signal=duration (memory.available=1m30s)")
        k, _, v = item.partition(op)
        out.append((k.strip(), op, v.strip()))
    return out


def _check_signal(signal: str) -> None:
    if signal not in SIGNALS:
        raise ValueError(f"unknown eviction signal {signal!r}: use one of {', '.join(SIGNALS)}")


def parse_thresholds(spec: str | Mapping[str, str], *, hard: bool, grace_periods: Mapping[str, float] | None = None) -> list[Threshold]:
    """Flags (a string) or a KubeletConfiguration map (signal -> quantity)."""
    if isinstance(spec, str):
        pairs = {}
        for k, op, v in parse_pairs(spec):
            if op != "<":
                raise ValueError(f"eviction threshold {k}{op}{v}: the only operator is '<' (as memory.available<100Mi)")
            pairs[k] = v
    else:
        pairs = {k: str(v) for k, v in spec.items()}
    grace_periods = grace_periods or {}
    out = []
    for signal, value in pairs.items():
        _check_signal(signal)
        grace = 0.0
        if not hard:
            if signal not in grace_periods:
                raise ValueError(f"eviction soft threshold {signal} has no grace period: add "
                                 f"--eviction-soft-grace-period={signal}=1m30s (how long it must hold before pods are evicted)")
            grace = grace_periods[signal]
        if value.endswith("%"):
            try:
                pct = float(value[:-1]) / 100
            except ValueError:
                raise ValueError(f"eviction threshold {signal}<{value}: {value!r} is not a percentage") from None
            if not 0 <= pct <= 1:
                raise ValueError(f"eviction threshold {signal}<{value}: a percentage lies between 0% and 100%")
            out.append(Threshold(signal, None, pct, grace, hard))
        else:
            out.append(Threshold(signal, _quantity(value, signal), None, grace, hard))
    return out


def parse_grace_periods(spec: str | Mapping[str, str], duration: Callable[[str], float]) -> dict[str, float]:
    """``memory.available=1m30s,...`` (or a map) → seconds per signal; ``duration`` parses Go durations."""
    if isinstance(spec, str):
        items = {}
        for k, op, v in parse_pairs(spec):
            if op != "=":
                raise ValueError(f"eviction grace period {k}{op}{v}: write signal=duration, as memory.available=1m30s")
            items[k] = v
    else:
        items = dict(spec)
    out = {}
    for signal, value in items.items():
        _check_signal(signal)
        out[signal] = float(duration(value))
    return out


def flag_map(text: str, op: str, what: str) -> dict[str, str]:
    """A flag's ``signal<quantity,...`` (``op`` ``<``) or ``signal=duration,...`` (``=``) as a map."""
    out = {}
    for k, got, v in parse_pairs(text):
        if got != op:
            example = "memory.available<100Mi" if op == "<" else "memory.available=1m30s"
            raise ValueError(f"{what}: {k}{got}{v} is not signal{op}value (write it as {example})")
        _check_signal(k)
        out[k] = v
    return out


def configured_thresholds(hard: Mapping[str, str] | None, soft: Mapping[str, str], grace: Mapping[str, float],
                          min_reclaim: Mapping[str, str] | None = None) -> list[Threshold]:
    """The kubelet's thresholds: ``hard`` None means upstream's defaults; a signal given an empty
    value or ``0%`` is left out (how upstream's config turns one off); ``min_reclaim``: signal ->
    quantity or percentage (``--eviction-minimum-reclaim``) for the thresholds of that signal."""
    hard_map = dict(hard) if hard is not None else {k: v for k, _, v in parse_pairs(DEFAULT_HARD)}
    keep = {k: v for k, v in hard_map.items() if v not in ("", "0%")}
    out = [*parse_thresholds(keep, hard=True), *parse_thresholds(dict(soft), hard=False, grace_periods=grace)]
    reclaim: dict[str, tuple[int | None, float | None]] = {}
    for signal, text in (min_reclaim or {}).items():
        _check_signal(signal)
        t = parse_thresholds({signal: str(text)}, hard=True)[0]
        reclaim[signal] = (t.quantity, t.percentage)
    return [replace(t, min_reclaim=reclaim[t.signal][0], min_reclaim_percentage=reclaim[t.signal][1]) if t.signal in reclaim else t
            for t in out]
