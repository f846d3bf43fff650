"""A pytest plugin: the run fails if a test was skipped for a reason not listed here.

A skipped test is a hole in the evidence; each reason it may be skipped for
is written down below, with why it is acceptable. In CI a missing tool is not
acceptable at all (``tests/support/tools.py``): the session refuses to start
without etcd or kubectl, so those reasons can only occur outside CI.

Loaded by ``tests/conftest.py`` (``pytest_plugins``); a run with an unlisted
skip ends with exit status 1 and names each one.
"""

from __future__ import annotations

import pytest

from tests.support.tools import CONTAINERD_NEXT_MISSING, ETCD_MISSING, KUBECTL_MISSING, POD_NETWORK_MISSING, in_ci

#: reason (the start of the skip message) -> why skipping for it is acceptable
LISTED_REASONS: dict[str, str] = {
    "no writable cgroup v1 memory hierarchy on this machine": "the kubelet's memory limits need a writable cgroup; without one they are only recorded, and the test says so",
}
#: acceptable only outside CI (a developer's machine without the tool)
OUTSIDE_CI_REASONS: dict[str, str] = {
    ETCD_MISSING: "the etcd backend's tests need the etcd binary",
    KUBECTL_MISSING: "the e2e tests drive the real kubectl",
    "needs root: the kubelet runs OCI containers on an overlay rootfs": "a rootless node runs pulled images read-only; CI runs as root",
    "containerd tests need root, Debian's containerd and containernetworking-plugins": "containerd's CRI needs root (runc, mounts, netns); CI is root and installs containerd",
    CONTAINERD_NEXT_MISSING: "the evented PLEG needs containerd 1.7 (Debian 12 has 1.6); scripts/test unpacks Debian's next release's as root, in CI too",
    POD_NETWORK_MISSING: "network namespaces, bridges and nftables need root; CI is root and installs the packages",
    "needs root, bwrap and setpriv: the kubelet applies securityContext that way": "an unprivileged bwrap gives containers no capabilities or other users; CI is root",
    "needs root, bwrap and unshare: the host view's overlay": "a rootless node cannot mount overlays; CI is root",
}

_unlisted: list[tuple[str, str]] = []


def listed(reason: str, *, ci: bool) -> bool:
    reasons = dict(LISTED_REASONS) if ci else {**LISTED_REASONS, **OUTSIDE_CI_REASONS}
    return any(reason.startswith(r) for r in reasons)


def _reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = _reason(report)
        if not listed(reason, ci=in_ci()):
            _unlisted.append((report.nodeid, reason))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _unlisted and exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    if _unlisted:
        terminalreporter.section("skipped without a listed reason (tests/support/skip_policy.py)", red=True)
        for nodeid, reason in _unlisted:
            terminalreporter.line(f"{nodeid}: {reason}")
