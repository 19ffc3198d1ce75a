"""A real HTTP server on a free loopback port, in a thread, for tests that need something on
the other end of a URL (an owner's webhook, an LLM endpoint)."""

from __future__ import annotations

import contextlib
import http.server
import ssl
import threading
from collections.abc import Iterator


class QuietHandler(http.server.BaseHTTPRequestHandler):
    """A request handler that answers with ``answer`` and keeps no access log (tests assert on
    what the server received, not on log lines)."""

    def answer(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(OSError):  # the client gave up (timeout tests)
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """No access log."""


@contextlib.contextmanager
def loopback_server(
    handler: type[QuietHandler], *, tls: ssl.SSLContext | None = None
) -> Iterator[str]:
    """Serve ``handler`` on 127.0.0.1 (a free port); yields ``http://127.0.0.1:<port>``.
    ``tls``: served over TLS with that context instead (``https://``); a client that gives
    up its handshake is not reported."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    server.block_on_close = False
    if tls is not None:
        server.handle_error = lambda *args: None  # type: ignore[method-assign]
        # The handshake in each request's thread (on its first read), not the accepting one.
        server.socket = tls.wrap_socket(
            server.socket, server_side=True, do_handshake_on_connect=False
        )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
