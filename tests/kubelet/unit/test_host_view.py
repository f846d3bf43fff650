"""Mount points the read-only host view lacks come from one read-only overlay
(k8py.kubelet.runtime.process.host_view) where overlayfs allows, instead of a
tmpfs rebuilt with every host entry bound back: the same view, in one mount.
The second test runs the real bwrap, unshare and overlayfs (as root; without
overlayfs it checks the rebuilt view the runtime then falls back to)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time

import pytest

from k8py.kubelet.runtime.process import host_view, launcher, oci_container
from k8py.kubelet.runtime.protocols import Mount


def test_a_missing_mount_point_is_planned_as_one_overlay(tmp_path, monkeypatch) -> None:
    big, missing = "/usr/share", "/usr/share/k8py-view-test/html"
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(host_view, "_mount_points", lambda: ["/", "/proc", "/run", "/run/netns"])
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    src = tmp_path / "html"
    src.mkdir()
    conf = tmp_path / "app.conf"
    conf.write_text("x")
    mounts = [Mount(missing, str(src), False), Mount("/usr/share/k8py-view-test/conf/app.conf", str(conf), True),
              Mount("/run/k8py-view-test/token", str(src), True), Mount("/k8py-view-test-top", str(src), True)]
    view = host_view.plan(mounts, view_dir=str(tmp_path / "view"), overlay="disk")
    assert view.overlaid == (big,)  # /run has a mount below it (its /run/netns): rebuilt as before; / never overlaid
    top = view.prefix[view.prefix.index("k8py-view") + 1]
    assert view.prefix[-3:] == [top, big, "--"]
    assert os.path.isdir(os.path.join(top, "k8py-view-test/html"))
    assert os.path.isfile(os.path.join(top, "k8py-view-test/conf/app.conf"))  # a file's mount point is a file
    assert sorted(os.listdir(top)) == ["k8py-view-test"]  # the mount points only
    args = launcher.plan_mounts(mounts, overlaid=view.overlaid)
    assert ("--tmpfs", big) not in zip(args, args[1:])
    assert ("--tmpfs", "/run") in zip(args, args[1:]) and ("--tmpfs", "/") in zip(args, args[1:])
    assert host_view.plan(mounts, view_dir=str(tmp_path / "view2"), overlay="") == host_view.HostView()  # no overlayfs: as before


def test_the_container_sees_the_host_view_read_only_with_its_volume(tmp_path) -> None:
    bwrap, unshare = shutil.which("bwrap"), shutil.which("unshare")
    if os.geteuid() != 0 or not bwrap or not unshare:
        pytest.skip("needs root, bwrap and unshare: the host view's overlay")
    mode = oci_container.overlay_mode(str(tmp_path / "state"))
    # a host directory outside /tmp (bwrap's own there) with entries and no mounts below it
    host = tempfile.mkdtemp(prefix="k8py-host-view-", dir="/var/tmp" if os.path.isdir("/var/tmp") else os.path.expanduser("~"))
    try:
        for name in ("a", "b", "c"):
            open(os.path.join(host, name), "w").close()
        os.mkdir(os.path.join(host, "sub"))
        missing = os.path.join(host, "nginx", "html")
        src = tmp_path / "html"
        src.mkdir()
        (src / "index.html").write_text("hello")
        mounts = [Mount(missing, str(src), False)]
        view = host_view.plan(mounts, view_dir=str(tmp_path / "view"), overlay=mode)
        assert view.overlaid == ((host,) if mode else ())
        script = (f'ls {host} | wc -l; cat {missing}/index.html; echo; touch {host}/sub/x 2>/dev/null && echo sub-writable; '
                  f'echo written > {missing}/out && echo volume-writable')
        launch = launcher.build_launch(["/bin/sh", "-c", script], bwrap=bwrap, mounts=mounts, working_dir="",
                                       hostname="t", status_fd=2, fallback_cwd=str(tmp_path), overlaid=view.overlaid)
        started = time.perf_counter()
        out = subprocess.run(view.wrap(launch.argv), capture_output=True, text=True, timeout=60)
        took = time.perf_counter() - started
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["5", "hello", "volume-writable"]  # a, b, c, sub and nginx; read-only but the volume
        assert (src / "out").read_text() == "written\n"
        assert sorted(os.listdir(host)) == ["a", "b", "c", "sub"]  # the host is untouched
        print(f"view ({'overlay' if mode else 'rebuilt'}) {took * 1000:.0f} ms")
    finally:
        shutil.rmtree(host, ignore_errors=True)


def test_only_the_outermost_directories_under_tmp_are_bound_back() -> None:
    assert launcher.outermost_under_tmp(["/usr", "/tmp/venv/lib/python3.11", "/tmp/venv", "/tmp/co/src/k8py/", "/tmpx",
                                         "/tmp/venv"]) == ["/tmp/co/src/k8py", "/tmp/venv"]
    assert launcher.outermost_under_tmp(["/root/.pyenv/versions/3.11.7", "/work/main/src/k8py"]) == []


def test_a_python_or_k8py_installed_under_tmp_stays_reachable_in_the_private_tmp(tmp_path, monkeypatch) -> None:
    """A checkout or virtualenv under /tmp: the built-in images run its files (nginx is a script of
    this package), which the container's private /tmp would otherwise hide."""
    from tests.support.tools import bwrap_binary

    bwrap = bwrap_binary()
    assert bwrap, "bwrap is required (Debian's bubblewrap)"
    install = tempfile.mkdtemp(prefix="k8py-install-", dir="/tmp")
    try:
        with open(os.path.join(install, "app.py"), "w") as f:
            f.write("print('ran from', __file__)\n")
        script = os.path.join(install, "app.py")

        def run() -> subprocess.CompletedProcess:
            launch = launcher.build_launch([launcher.sys.executable, "-I", "-S", script], bwrap=bwrap, mounts=[],
                                           working_dir="", hostname="t", status_fd=2, fallback_cwd=str(tmp_path))
            return subprocess.run(launch.argv, capture_output=True, text=True, timeout=60)

        monkeypatch.setattr(launcher, "tmp_installs", lambda: [])
        hidden = run()
        assert (hidden.returncode, hidden.stdout) == (2, "")  # python: can't open file (the private /tmp hides it)
        monkeypatch.setattr(launcher, "tmp_installs", lambda: [install])
        out = run()
        assert out.returncode == 0, out.stderr
        assert out.stdout == f"ran from {script}\n"
    finally:
        shutil.rmtree(install, ignore_errors=True)
