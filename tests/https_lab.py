"""HTTPS on loopback for tests: a certificate authority the test makes with `openssl`, a
server certificate for 127.0.0.1 and 127.0.0.2 that it signs, and HTTP(S) servers that
record every request they get (path and headers). Clients trust the CA by its file
(`curl --cacert`, or `CURL_CA_BUNDLE`)."""

from __future__ import annotations

import contextlib
import http.server
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class LoopbackCA:
    """A CA and one server certificate it signed (subjectAltName IP:127.0.0.1, IP:127.0.0.2)."""

    cert: Path
    server_cert: Path
    server_key: Path

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.server_cert, self.server_key)
        return context


def make_ca(folder: Path, days: int = 2) -> LoopbackCA:
    """The CA and server certificate in `folder`: made there (valid `days`) unless a complete
    set is there already (a kept folder: an image whose layers trust it stays cached)."""
    kept = LoopbackCA(folder / "hil-test-ca.crt", folder / "server.pem", folder / "server.key")
    if all(path.is_file() for path in (kept.cert, kept.server_cert, kept.server_key)):
        return kept
    folder.mkdir(parents=True, exist_ok=True)

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, capture_output=True, check=True, timeout=120)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "hil-test-ca.crt",
            "-days", str(days), "-subj", "/CN=hil test CA")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
            "-subj", "/CN=127.0.0.1")
    (folder / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,IP:127.0.0.2\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "hil-test-ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.pem", "-days", str(days), "-extfile", "san.cnf")
    return kept


@dataclass
class Request:
    """One request a server got."""

    path: str
    headers: dict[str, str] = field(default_factory=dict)


Answer = Callable[[Request], tuple[int, dict[str, str], bytes]]
"""(status, headers, body) for a request."""


@contextlib.contextmanager
def serve(answer: Answer, host: str = "127.0.0.1", tls: LoopbackCA | None = None) -> Iterator[tuple[str, list[Request]]]:
    """A server on `host` (HTTPS with `tls`' certificate, else plain HTTP) answering each GET
    with `answer(request)`; yields its base URL and the list of requests it got."""
    seen: list[Request] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - stdlib name
            request = Request(self.path, {key.lower(): value for key, value in self.headers.items()})
            seen.append(request)
            status, headers, body = answer(request)
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = http.server.ThreadingHTTPServer((host, 0), Handler)
    if tls is not None:
        server.socket = tls.server_context().wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"{'https' if tls else 'http'}://{host}:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
