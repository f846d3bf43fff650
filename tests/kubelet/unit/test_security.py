"""securityContext arithmetic of the process runtime: containerd's capability rules, and the
``setpriv`` prefix that applies them (the e2e test reads the result in /proc/self/status)."""

from __future__ import annotations

import pytest

from k8py.kubelet.runtime.process.security import DEFAULT_CAPABILITIES, Security, capability_set, node_capabilities, setpriv_argv
from k8py.kubelet.runtime.protocols import RuntimeErrorStatus

EVERYTHING = node_capabilities() or tuple(DEFAULT_CAPABILITIES)


def test_capabilities_follow_containerds_order() -> None:
    assert set(capability_set([], [], privileged=False, everything=EVERYTHING)) == set(DEFAULT_CAPABILITIES) & set(EVERYTHING)
    assert capability_set(["ALL"], ["chown"], privileged=False, everything=EVERYTHING) == tuple(c for c in EVERYTHING if c != "CAP_CHOWN")
    assert capability_set(["NET_BIND_SERVICE"], ["ALL"], privileged=False, everything=EVERYTHING) == ("CAP_NET_BIND_SERVICE",)  # ALL clears, then adds
    assert capability_set([], ["ALL"], privileged=False, everything=EVERYTHING) == ()
    assert capability_set(["ALL"], [], privileged=True, everything=EVERYTHING) == tuple(EVERYTHING)
    assert "CAP_NET_ADMIN" in capability_set(["CAP_NET_ADMIN"], [], privileged=False, everything=EVERYTHING)
    with pytest.raises(RuntimeErrorStatus, match="unknown capability 'CAP_FLY'"):
        capability_set(["FLY"], [], privileged=False, everything=EVERYTHING)


def test_the_setpriv_prefix_sets_user_groups_and_the_bounding_set(monkeypatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 0)
    monkeypatch.setattr("shutil.which", lambda name: f"/usr/bin/{name}")
    sec = Security(("CAP_CHOWN", "CAP_KILL"), uid=1000, gid=3000, groups=(2000, 4000), no_new_privs=True)
    assert setpriv_argv(sec, bwrapped=False) == ["/usr/bin/setpriv", "--reuid=1000", "--regid=3000", "--groups=2000,4000",
                                                 "--inh-caps=-all", "--bounding-set=-all,+chown,+kill", "--no-new-privs", "--"]
    assert "--no-new-privs" not in setpriv_argv(sec, bwrapped=True)  # bwrap has set it
    assert "--clear-groups" in setpriv_argv(Security(()), bwrapped=True)
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    assert setpriv_argv(sec, bwrapped=True) == []
