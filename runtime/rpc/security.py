"""Who may talk to a job's servers: ZeroMQ's own handshake, keyed from the job token.

A server accepts a connection only after the peer proved it holds the job token, inside
ZeroMQ's handshake, so a stranger never gets a message body into the server (a 256 MiB
message from an unauthenticated peer used to be read whole, and its memory kept):

- by default with ZeroMQ's PLAIN mechanism: the token is the password, checked in constant
  time by this process's ZAP handler (:class:`Gate`); the traffic itself is not encrypted
  (the token crossed the network in the clear before too, inside the job's Hello);
- with ``encrypt`` (``encrypt: true`` in the cluster YAML) with CURVE: the server's key pair
  and the clients' key pair derive from the token, every byte is encrypted, and the gate
  admits only the clients' public key.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading

import zmq
from zmq.utils import z85

log = logging.getLogger(__name__)

DOMAIN = b"dglctl"
USER = b"dglctl"
ZAP_ENDPOINT = "inproc://zeromq.zap.01"


def _secret(token: str, who: bytes) -> bytes:
    """A CURVE secret key (Z85) derived from the job token: the same on every host."""
    return z85.encode(hashlib.sha256(b"dglctl-curve:" + who + b":" + token.encode()).digest())


def secure_server(sock: zmq.Socket, token: str, encrypt: bool) -> None:
    """Make ``sock`` (before ``bind``) admit only peers that hold ``token``."""
    sock.setsockopt(zmq.ZAP_DOMAIN, DOMAIN)
    if encrypt:
        sock.setsockopt(zmq.CURVE_SERVER, 1)
        sock.setsockopt(zmq.CURVE_SECRETKEY, _secret(token, b"server"))
    else:
        sock.setsockopt(zmq.PLAIN_SERVER, 1)


def secure_client(sock: zmq.Socket, token: str, encrypt: bool) -> None:
    """Give ``sock`` (before ``connect``) the credentials a job's servers ask for."""
    if encrypt:
        client = _secret(token, b"client")
        sock.setsockopt(zmq.CURVE_SERVERKEY, zmq.curve_public(_secret(token, b"server")))
        sock.setsockopt(zmq.CURVE_SECRETKEY, client)
        sock.setsockopt(zmq.CURVE_PUBLICKEY, zmq.curve_public(client))
    else:
        sock.setsockopt(zmq.PLAIN_USERNAME, USER)
        sock.setsockopt(zmq.PLAIN_PASSWORD, token.encode())


class Gate:
    """The process's ZAP handler: answers ZeroMQ's authentication requests on a thread.

    Start it before the server socket binds; ``close()`` stops it. Refusals are logged with
    the peer's address (never the credentials).
    """

    def __init__(self, ctx: zmq.Context, token: str) -> None:
        self._token = token.encode()
        self._client_key = zmq.curve_public(_secret(token, b"client"))
        self._sock = ctx.socket(zmq.REP)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.bind(ZAP_ENDPOINT)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="zap", daemon=True)
        self._thread.start()

    def _admit(self, mechanism: bytes, credentials: list[bytes]) -> bool:
        if mechanism == b"PLAIN" and len(credentials) == 2:
            return (hmac.compare_digest(credentials[0], USER)
                    and hmac.compare_digest(credentials[1], self._token))
        if mechanism == b"CURVE" and len(credentials) == 1:
            return hmac.compare_digest(z85.encode(credentials[0]), self._client_key)
        return False

    def _run(self) -> None:
        poller = zmq.Poller()
        poller.register(self._sock, zmq.POLLIN)
        while not self._stop.is_set():
            if not poller.poll(100):
                continue
            frames = self._sock.recv_multipart()
            version, request_id, domain, address = frames[:4]
            mechanism, credentials = frames[5], frames[6:]
            ok = domain == DOMAIN and self._admit(mechanism, credentials)
            if not ok:
                log.warning("refused a %s connection from %s: no job token",
                            mechanism.decode(errors="replace"), address.decode(errors="replace"))
            self._sock.send_multipart([version, request_id, b"200" if ok else b"400",
                                       b"OK" if ok else b"no job token", b"", b""])

    def close(self) -> None:
        """Stop answering (the server socket must be closed first or soon after)."""
        self._stop.set()
        self._thread.join()
        self._sock.close(0)
