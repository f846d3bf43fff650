"""The process runtime's built-in nginx (k8py.kubelet.runtime.process.nginx), over real sockets.

It answers as nginx's default server: a file with its type and length, a
directory redirected to its trailing slash and served by its index.html, 403
for a directory without one, 404 for what is missing, 405 for another method,
400 for what climbs out of the root or is not HTTP, HEAD without a body, and
the welcome page when there is no document root; run as the image runs it
(``python -I -S nginx.py``) it logs each request, exits 0 on SIGTERM, and
imports neither ``http.server`` nor ``ssl`` (9 MB a pod where it needs 4).
"""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import threading

import pytest

from k8py.kubelet.runtime.process import nginx


@pytest.fixture
def docroot(tmp_path):
    root = tmp_path / "html"
    (root / "sub" / "empty").mkdir(parents=True)
    (root / "index.html").write_bytes(nginx.WELCOME)
    (root / "foo.txt").write_text("hello\n")
    (root / "sub" / "index.html").write_text("<p>sub</p>")
    (root / "app.js").write_text("1;")
    return str(root)


def _server(docroot: str) -> int:
    listener = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=nginx.serve, args=(listener, docroot), daemon=True).start()
    return listener.getsockname()[1]


def _get(port: int, path: str, method: str = "GET") -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request(method, path)
    response = conn.getresponse()
    response.body = response.read()  # type: ignore[attr-defined]
    conn.close()
    return response


def test_files_directories_and_errors_are_answered_as_nginx_answers_them(docroot):
    port = _server(docroot)
    index = _get(port, "/")
    assert (index.status, index.body, index.getheader("Server")) == (200, nginx.WELCOME, "nginx/1.27.0")
    assert index.getheader("Content-Type") == "text/html" and index.getheader("Connection") == "close"
    text = _get(port, "/foo.txt?x=1")
    assert (text.status, text.body, text.getheader("Content-Type"), text.getheader("Content-Length")) == (200, b"hello\n", "text/plain", "6")
    assert text.getheader("Last-Modified", "").endswith(" GMT")
    assert _get(port, "/app.js").getheader("Content-Type") == "application/javascript"
    assert _get(port, "/%66oo.txt").body == b"hello\n"
    head = _get(port, "/foo.txt", "HEAD")
    assert (head.status, head.body, head.getheader("Content-Length")) == (200, b"", "6")
    moved = _get(port, "/sub")
    assert moved.status == 301 and moved.getheader("Location", "").endswith("/sub/")
    assert _get(port, "/sub/").body == b"<p>sub</p>"
    for path, status in (("/sub/empty/", 403), ("/missing.html", 404), ("/../etc/passwd", 400), ("/%zz", 400)):
        answer = _get(port, path)
        assert answer.status == status, path
        assert f"<title>{status} ".encode() in answer.body and b"nginx/1.27.0" in answer.body
    assert _get(port, "/", "POST").status == 405


def test_without_a_document_root_only_the_welcome_page_is_there(tmp_path):
    port = _server(str(tmp_path / "absent"))
    assert _get(port, "/").body == nginx.WELCOME
    assert _get(port, "/index.html").status == 200
    assert _get(port, "/other").status == 404


def test_what_is_not_http_gets_400(docroot):
    port = _server(docroot)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"hello there\r\n\r\n")
        assert sock.recv(64).startswith(b"HTTP/1.1 400 Bad Request\r\n")


def test_as_the_image_runs_it_it_logs_stops_on_sigterm_and_imports_no_http_server_nor_ssl(tmp_path):
    env = {"NGINX_LISTEN_ADDRESS": "127.0.0.1", "NGINX_PORT": "0", "PATH": os.environ.get("PATH", "")}
    proc = subprocess.Popen([sys.executable, "-X", "importtime", "-I", "-S", nginx.__file__], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert "listening on 127.0.0.1:" in line, line + proc.stderr.read()
        answer = _get(int(line.rsplit(":", 1)[1]), "/")
        assert answer.status == 200 and b"Welcome to nginx!" in answer.body
        log = proc.stdout.readline()
        assert log.startswith("127.0.0.1 - - [") and '"GET / HTTP/1.1" 200 ' in log, log
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        imported = {row.rsplit("|", 1)[-1].strip() for row in proc.stderr.read().splitlines() if row.startswith("import time:")}
        assert "socket" in imported and not imported & {"http.server", "http.client", "ssl", "email", "mimetypes"}, imported
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
