"""HTTPS for a segment's API: the certificate, its fingerprint, and TLS on waitress's loop.

waitress has no TLS of its own. Rather than trade it (and the flood guards of
``server.platform.wsgi``,
built on its loop) for another server, TLS is added to its connections: each accepted socket is
wrapped in non-blocking TLS, the handshake runs on the same loop as everything else
(:class:`TlsChannel`), and a handshake that does not finish within the header deadline is
closed like a request whose headers do not. Every other guard (connection bounds per client
and in all, request deadlines, idle time-outs) applies unchanged.

With no files given, a self-signed certificate (EC P-256, ten years) is made at first start by
the ``openssl`` command and kept in the data directory, the key at mode 0600. Its fingerprint,
``sha256:`` and the lowercase hex SHA-256 of the DER certificate, is what clients pin.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import ssl
import subprocess
import time
from pathlib import Path
from typing import Any

from waitress.channel import HTTPChannel

from server.platform.atomicfile import tighten

__all__ = ["TlsChannelMixin", "ensure_certificate", "fingerprint", "server_context"]

log = logging.getLogger("pdn.tls")

CERT_FILE = "tls-cert.pem"
KEY_FILE = "tls-key.pem"


def ensure_certificate(data_dir: Path, host: str | None = None) -> tuple[Path, Path]:
    """The self-signed certificate and key in ``data_dir``, made when missing (OSError or
    RuntimeError when they cannot be)."""
    cert, key = data_dir / CERT_FILE, data_dir / KEY_FILE
    if cert.exists() and key.exists():
        tighten(key)  # a key an older release or a hand left readable by others
        return cert, key
    data_dir.mkdir(parents=True, exist_ok=True)
    name = host or socket.gethostname() or "pdn"
    # The key file exists at 0600 before openssl writes into it (it keeps the mode).
    for path in (key, cert):
        path.unlink(missing_ok=True)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    command = [
        "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-days", "3650", "-subj", f"/CN={name}", "-keyout", str(key),
        "-out", str(cert),
    ]  # fmt: skip
    try:
        made = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except FileNotFoundError:
        raise RuntimeError("making a TLS certificate needs the openssl command") from None
    if made.returncode != 0:
        key.unlink(missing_ok=True)
        cert.unlink(missing_ok=True)
        raise RuntimeError(f"openssl could not make a certificate: {made.stderr.strip()[:300]}")
    cert.chmod(0o644)
    log.info("made a self-signed TLS certificate for %s in %s", name, data_dir)
    return cert, key


def fingerprint(cert: Path) -> str:
    """``sha256:<lowercase hex>`` of the (first) certificate's DER bytes."""
    der = ssl.PEM_cert_to_DER_cert(cert.read_text(encoding="ascii"))
    return "sha256:" + hashlib.sha256(der).hexdigest()


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    """TLS 1.2 and newer, Python's default ciphers; ssl.SSLError for unusable files."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    return context


class TlsChannelMixin(HTTPChannel):
    """waitress's channel over a non-blocking TLS socket: the handshake first, then reads and
    writes that take OpenSSL's "want read / want write" as "not now"."""

    handshaken = False
    accepted_at = 0.0  # time.monotonic() of the accept: the handshake's deadline counts from it
    _handshake_wants_write = False

    def _handshake(self) -> None:
        sock: Any = self.socket
        try:
            sock.do_handshake()
        except ssl.SSLWantReadError:
            self._handshake_wants_write = False
            return
        except ssl.SSLWantWriteError:
            self._handshake_wants_write = True
            return
        except (ssl.SSLError, OSError) as error:
            log.debug("TLS handshake with %s failed: %s", self.addr, error)
            self.handle_close()
            return
        self.handshaken = True
        self._handshake_wants_write = False

    def writable(self) -> bool:
        if not self.handshaken:
            return self._handshake_wants_write
        return bool(super().writable())

    def handle_write(self) -> None:
        if not self.handshaken:
            self._handshake()
            return
        super().handle_write()

    def handle_read(self) -> None:
        if not self.handshaken:
            self._handshake()
            if not self.handshaken:
                return
        sock: Any = self.socket
        while True:
            try:
                data = sock.recv(self.adj.recv_bytes)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return
            except (ssl.SSLError, OSError):
                self.handle_close()
                return
            if not data:
                self.handle_close()
                return
            self.last_activity = time.time()
            self.received(data)
            # Bytes OpenSSL decrypted already never wake the poll loop again: read them now.
            if not sock.pending() or not self.readable():
                return

    def send(self, data: bytes, do_close: bool = True) -> int:
        sock: Any = self.socket
        try:
            return int(sock.send(data))
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
            return 0
        except (ssl.SSLError, OSError):
            if do_close:
                self.handle_close()
            return 0
