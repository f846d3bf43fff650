"""What importing k8py dns costs every process forked from k8py up's zygote.

dnspython imports its DNS-over-HTTPS client (httpx, httpcore, h2, anyio,
trio) whenever httpx is installed, unless told not to; k8py dns forwards over
UDP and TCP only, so none of it may come in with the proxy package."""

from __future__ import annotations

import subprocess
import sys

CHECK = ("import sys, k8py.proxy.app, k8py.proxy.dns_server; "
         "print(sorted({m.split('.')[0] for m in sys.modules} & {'httpx', 'httpx2', 'httpcore', 'httpcore2', 'h2', 'anyio', 'trio'}))")


def test_the_proxy_package_does_not_import_a_dns_over_https_client():
    run = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
