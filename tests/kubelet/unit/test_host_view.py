"""Mount points the read-only host view lacks come from one read-only overlay
(k8py.kubelet.runtime.process.host_view) where overlayfs allows, instead of a
tmpfs rebuilt with every host entry bound back: the same view, in one mount.
The bwrap test runs the real bwrap, unshare and overlayfs (as root)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time

import pytest

from k8py.kubelet.runtime.process import host_view, launcher, oci_container
from k8py.kubelet.runtime.protocols import Mount

#: a host directory with many entries and no mounts below it, and a mountPath it lacks
BIG = "/usr/share"
MISSING = "/usr/share/k8py-view-test/html"


def _skip_unless_overlay(tmp_path) -> str:
    if os.geteuid() != 0 or not shutil.which("bwrap") or not shutil.which("unshare"):
        pytest.skip("needs root, bwrap and unshare (the process runtime's isolated mode)")
    mode = oci_container.overlay_mode(str(tmp_path / "state"))
    if not mode:
        pytest.skip("no overlayfs on this machine")
    if os.path.lexists(os.path.dirname(MISSING)) or any(p.startswith(BIG + "/") for p in host_view._mount_points()):
        pytest.skip(f"{BIG} is not as this test expects here")
    return mode


def test_a_missing_mount_point_is_planned_as_one_overlay(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(host_view, "_mount_points", lambda: ["/", "/proc", "/run", "/run/netns"])
    src = tmp_path / "html"
    src.mkdir()
    conf = tmp_path / "app.conf"
    conf.write_text("x")
    mounts = [Mount(MISSING, str(src), False), Mount("/usr/share/k8py-view-test/conf/app.conf", str(conf), True),
              Mount("/run/k8py-view-test/token", str(src), True), Mount("/existing-is-not-planned", str(src), True)]
    view = host_view.plan(mounts, view_dir=str(tmp_path / "view"), overlay="disk")
    assert view.overlaid == (BIG,)  # /run has a mount below it (its /run/netns): rebuilt as before; / never overlaid
    top = view.prefix[view.prefix.index("k8py-view") + 1]
    assert view.prefix[-3:] == [top, BIG, "--"]
    assert os.path.isdir(os.path.join(top, "k8py-view-test/html"))
    assert os.path.isfile(os.path.join(top, "k8py-view-test/conf/app.conf"))  # a file's mount point is a file
    assert sorted(os.listdir(top)) == ["k8py-view-test"]  # the mount points only
    args = launcher.plan_mounts(mounts, overlaid=view.overlaid)
    assert ("--tmpfs", BIG) not in zip(args, args[1:])
    assert ("--tmpfs", "/run") in zip(args, args[1:])
    assert host_view.plan(mounts, view_dir=str(tmp_path / "view2"), overlay="") == host_view.HostView()  # no overlayfs: as before


def test_the_container_sees_the_host_view_read_only_with_its_volume(tmp_path) -> None:
    mode = _skip_unless_overlay(tmp_path)
    src = tmp_path / "html"
    src.mkdir()
    (src / "index.html").write_text("hello")
    mounts = [Mount(MISSING, str(src), False)]
    view = host_view.plan(mounts, view_dir=str(tmp_path / "view"), overlay=mode)
    assert view.overlaid == (BIG,)
    script = (f'ls {BIG} | wc -l; cat {MISSING}/index.html; echo; touch {BIG}/doc/k8py-x 2>/dev/null && echo doc-writable; '
              f'touch {BIG}/k8py-x 2>/dev/null && echo top-writable; echo written > {MISSING}/out && echo volume-writable')
    status_r, status_w = os.pipe()
    try:
        launch = launcher.build_launch(["/bin/sh", "-c", script], bwrap=shutil.which("bwrap"), mounts=mounts, working_dir="",
                                       hostname="t", status_fd=status_w, fallback_cwd=str(tmp_path), overlaid=view.overlaid)
        started = time.perf_counter()
        out = subprocess.run(view.wrap(launch.argv), capture_output=True, text=True, timeout=60, pass_fds=(status_w,))
        overlay_took = time.perf_counter() - started
    finally:
        os.close(status_r)
        os.close(status_w)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split()
    assert int(lines[0]) == len(os.listdir(BIG)) + 1  # the host's entries, and the mount point's parent
    assert lines[1:] == ["hello", "volume-writable"]  # read-only everywhere but the volume
    assert (src / "out").read_text() == "written\n"
    assert not os.path.lexists(os.path.dirname(MISSING)) and not os.path.lexists(f"{BIG}/k8py-x")  # the host is untouched
    # the rebuild it replaces: a bind mount per entry of /usr/share, several times slower
    with tempfile.TemporaryDirectory() as d:
        rebuilt = launcher.build_launch(["/bin/true"], bwrap=shutil.which("bwrap"), mounts=mounts, working_dir="", hostname="t",
                                        status_fd=2, fallback_cwd=d)
        started = time.perf_counter()
        subprocess.run(rebuilt.argv, capture_output=True, timeout=60, check=True)
        rebuild_took = time.perf_counter() - started
    print(f"overlay view {overlay_took * 1000:.0f} ms, tmpfs rebuild {rebuild_took * 1000:.0f} ms")
