"""The built-in stand-in the ``nginx`` image runs in the process runtime.

A small static web server on the pod's IP (``NGINX_LISTEN_ADDRESS``, set by
the runtime) and port 80 (``NGINX_PORT``), serving ``/usr/share/nginx/html``
(the image's copy with index.html, or a volume mounted there) and nginx's
welcome page when the container has no such directory (no bwrap), with nginx's ``Server`` header. Standard
library only, so it starts in a few tens of milliseconds. It exits 0 on
SIGTERM, as nginx does on a fast shutdown.
"""

from __future__ import annotations

import http.server
import os
import signal
import sys

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


class Handler(http.server.SimpleHTTPRequestHandler):
    server_version = "nginx/1.27.0"
    sys_version = ""

    def __init__(self, *args, **kw):  # type: ignore[no-untyped-def]
        super().__init__(*args, directory=DOCROOT, **kw)

    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        if os.path.isdir(DOCROOT):
            return super().do_GET()
        if self.path.split("?", 1)[0] in ("/", "/index.html"):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(WELCOME)))
            self.end_headers()
            self.wfile.write(WELCOME)
            return None
        self.send_error(404)
        return None

    def log_message(self, fmt: str, *args: object) -> None:
        sys.stdout.write(f'{self.client_address[0]} - - [{self.log_date_time_string()}] "{fmt % args}"\n')
        sys.stdout.flush()


def main() -> int:
    address = os.environ.get("NGINX_LISTEN_ADDRESS", "127.0.0.1")
    port = int(os.environ.get("NGINX_PORT", "80"))
    server = http.server.ThreadingHTTPServer((address, port), Handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"nginx (k8py built-in) listening on {address}:{port}", flush=True)
    try:
        server.serve_forever()
    except SystemExit:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
