"""The built-in stand-in the ``nginx`` image runs in the process runtime.

A small static web server on the pod's IP (``NGINX_LISTEN_ADDRESS``, set by
the runtime) and port 80 (``NGINX_PORT``), serving ``/usr/share/nginx/html``
(the image's copy with index.html, or a volume mounted there) and nginx's
welcome page when the container has no such directory (no bwrap), with
nginx's ``Server`` header. It exits 0 on SIGTERM, as nginx does on a fast
shutdown.

It answers as nginx's default server does: ``GET`` and ``HEAD`` of a file
(its type by its extension, as nginx's ``mime.types``), a directory without
its trailing slash redirected (301) to it, a directory's ``index.html``, 403
for a directory without one (no ``autoindex``), 404 for what is not there,
405 for another method, 400 for what is not HTTP; one request a connection
(``Connection: close``), one thread a connection; an access log line a
request on stdout, in nginx's ``combined`` format.

Why not ``http.server``: it imports ``email``, ``http.client`` (and with it
``ssl``), ``mimetypes`` and ``socketserver`` — measured, 8.9 MB private a
pod. This file needs sockets and threads only (about 4 MB, most of it the
interpreter's own): standard library only, run isolated and without site
(``python -I -S``), so it starts in a few tens of milliseconds.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time

WELCOME = b"""<!DOCTYPE html>
<html>
<head>
<title>Welcome to nginx!</title>
</head>
<body>
<h1>Welcome to nginx!</h1>
<p>If you see this page, the nginx web server is successfully installed and
working. Further configuration is required.</p>
<p><em>Thank you for using nginx.</em></p>
</body>
</html>
"""

ERROR_PAGE = b"""<!DOCTYPE html>
<html>
<head>
<title>Error</title>
</head>
<body>
<h1>An error occurred.</h1>
<p>Sorry, the page you are looking for is currently unavailable.<br/>
Please try again later.</p>
</body>
</html>
"""

DOCROOT = "/usr/share/nginx/html"
SERVER = "nginx/1.27.0"
#: nginx's mime.types for what a static site serves; anything else is application/octet-stream
TYPES = {
    "html": "text/html", "htm": "text/html", "shtml": "text/html", "css": "text/css", "xml": "text/xml",
    "txt": "text/plain", "js": "application/javascript", "mjs": "application/javascript", "json": "application/json",
    "gif": "image/gif", "jpeg": "image/jpeg", "jpg": "image/jpeg", "png": "image/png", "svg": "image/svg+xml",
    "svgz": "image/svg+xml", "ico": "image/x-icon", "webp": "image/webp", "avif": "image/avif", "woff": "font/woff",
    "woff2": "font/woff2", "pdf": "application/pdf", "wasm": "application/wasm", "zip": "application/zip",
    "mp4": "video/mp4", "webm": "video/webm", "mp3": "audio/mpeg",
}
REASONS = {200: "OK", 301: "Moved Permanently", 400: "Bad Request", 403: "Forbidden", 404: "Not Found",
           405: "Not Allowed", 500: "Internal Server Error"}
#: the most a request's line and headers may take, and how long the client has to send them
MAX_HEAD, READ_TIMEOUT = 8 * 1024, 60.0
_DAYS, _MONTHS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"), ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul",
                                                                      "Aug", "Sep", "Oct", "Nov", "Dec")


def http_date(when: float | None = None) -> str:
    t = time.gmtime(when)
    return f"{_DAYS[t.tm_wday]}, {t.tm_mday:02d} {_MONTHS[t.tm_mon - 1]} {t.tm_year} {t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} GMT"


def error_body(status: int) -> bytes:
    title = f"{status} {REASONS[status]}"
    return (f"<html>\r\n<head><title>{title}</title></head>\r\n<body>\r\n<center><h1>{title}</h1></center>\r\n"
            f"<hr><center>{SERVER}</center>\r\n</body>\r\n</html>\r\n").encode()


def unquote(path: str) -> str | None:
    """``%XX`` decoded (as UTF-8); None when malformed."""
    if "%" not in path:
        return path
    head, *rest = path.split("%")
    out = bytearray(head.encode())
    try:
        for part in rest:
            out += bytes.fromhex(part[:2]) + part[2:].encode()
        return out.decode()
    except ValueError:
        return None


def resolve(docroot: str, target: str) -> tuple[int, str]:
    """What a ``GET`` of ``target`` (the request's path) answers: (200, file), (301, location), or (status, "")."""
    path = unquote(target.split("?", 1)[0].split("#", 1)[0])
    if path is None or not path.startswith("/") or "\0" in path:
        return 400, ""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:  # (nginx normalizes and refuses what climbs above the root; none of ours do)
        return 400, ""
    fs = os.path.join(docroot, *parts)
    if os.path.isdir(fs):
        if not path.endswith("/"):
            return 301, path + "/"
        fs = os.path.join(fs, "index.html")
        if not os.path.exists(fs):
            return 403, ""
    if not os.path.isfile(fs):
        return 404, ""
    if not os.access(fs, os.R_OK):
        return 403, ""
    return 200, fs


def _read_head(conn: socket.socket) -> bytes | None:
    data = b""
    while b"\r\n\r\n" not in data and b"\n\n" not in data:
        if len(data) > MAX_HEAD:
            return None
        chunk = conn.recv(4096)
        if not chunk:
            return data or None
        data += chunk
    return data


def handle(conn: socket.socket, peer: str, docroot: str) -> None:
    """One connection: one request, its answer, a log line."""
    status, length, request_line, headers, file = 400, 0, "", {}, None
    try:
        conn.settimeout(READ_TIMEOUT)
        head = _read_head(conn)
        if head is None:
            return  # the client went away, or sent more than a request's head may be
        lines = head.decode("latin-1").replace("\r\n", "\n").split("\n")
        request_line = lines[0]
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        fields = request_line.split()
        body, content_type, extra = b"", "text/html", []
        if len(fields) != 3 or not fields[2].startswith("HTTP/"):
            status = 400
        elif fields[0] not in ("GET", "HEAD"):
            status = 405
        elif not os.path.isdir(docroot):  # no image directory (no bwrap): the welcome page alone
            status = 200 if fields[1].split("?", 1)[0] in ("/", "/index.html") else 404
            body = WELCOME if status == 200 else b""
        else:
            status, where = resolve(docroot, fields[1])
            if status == 301:
                extra.append(f"Location: http://{headers.get('host') or conn.getsockname()[0]}{where}")
            elif status == 200:
                file = open(where, "rb")
                name = os.path.basename(where)
                content_type = TYPES.get(name.rsplit(".", 1)[-1].lower() if "." in name else "", "application/octet-stream")
                extra.append(f"Last-Modified: {http_date(os.fstat(file.fileno()).st_mtime)}")
        if status != 200:
            body = error_body(status)
        length = os.fstat(file.fileno()).st_size if file is not None else len(body)
        answer = [f"HTTP/1.1 {status} {REASONS[status]}", f"Server: {SERVER}", f"Date: {http_date()}",
                  f"Content-Type: {content_type}", f"Content-Length: {length}", "Connection: close", *extra]
        head_only = fields[:1] == ["HEAD"]
        conn.sendall(("\r\n".join(answer) + "\r\n\r\n").encode("latin-1") + (b"" if head_only else body))
        if file is not None and not head_only:
            conn.sendfile(file)
    except OSError:
        status = 500 if status == 200 and file is None else status
    finally:
        if file is not None:
            file.close()
        conn.close()
        if request_line:
            stamp = time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime())
            sys.stdout.write(f'{peer} - - [{stamp}] "{request_line}" {status} {length} "{headers.get("referer", "-")}" '
                             f'"{headers.get("user-agent", "-")}"\n')
            sys.stdout.flush()


def serve(listener: socket.socket, docroot: str = DOCROOT) -> None:
    """Accept connections until the process ends, each on a thread of its own."""
    while True:
        conn, peer = listener.accept()
        threading.Thread(target=handle, args=(conn, peer[0], docroot), daemon=True).start()


def main() -> int:
    address = os.environ.get("NGINX_LISTEN_ADDRESS", "127.0.0.1")
    port = int(os.environ.get("NGINX_PORT", "80"))
    listener = socket.create_server((address, port), backlog=128)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"nginx (k8py built-in) listening on {address}:{listener.getsockname()[1]}", flush=True)
    try:
        serve(listener)
    except SystemExit:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
