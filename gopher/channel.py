"""The sockets of a resident run: a listener no stray client can stall, a mutual handshake,
and length-prefixed frames, each authenticated when the user's Spark asks for authentication.

Handshake (both sides hold the run's random 32-byte key; nothing else is trusted):
the accepting side sends a magic and a nonce, the connecting side answers with its nonce
and ``HMAC-SHA256(key, "client" | both nonces)``, the accepting side proves itself with
``HMAC-SHA256(key, "server" | both nonces)``. Each read of the handshake has a deadline of
:data:`HANDSHAKE_SECONDS`; a client that stays silent, closes, or answers wrongly is dropped
on its own thread while accepting goes on.

Frames: an 8-byte length and the payload. With ``frames=True`` (the user's Spark has
``spark.authenticate`` or ``spark.network.crypto.enabled`` on) every frame also carries
``HMAC-SHA256(direction key, sequence number | length | payload)``, the direction keys
derived from the run key and both nonces: a frame altered, dropped, replayed, reordered or
moved from another connection ends the connection before its payload is unpickled. Frames
are not encrypted: what the run sends (plans, messages, results) can be read on the wire.
"""
from __future__ import annotations

import contextlib
import hmac
import pickle
import secrets
import select
import socket
import struct
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import wait

from gofs.errors import EngineError

HANDSHAKE_SECONDS = 10.0
BACKLOG = 128
_MAGIC = b"gopher1\0"
_NONCE = 32
_TAG = 32
_LENGTH = struct.Struct("<Q")
_SMALL = 1 << 16        # payloads up to this size go out in one send with their header


class HandshakeError(EngineError, ConnectionError):
    """The other end did not prove it holds the run's key in time."""


class FrameError(EngineError, ConnectionError):
    """A frame failed its authentication or exceeds the frame-size limit; the connection is dropped."""


@dataclass(frozen=True)
class RunKey:
    """What both ends of a run's connections share: the key and whether frames are authenticated."""

    key: bytes
    frames: bool = False

    @classmethod
    def fresh(cls, frames: bool) -> "RunKey":
        return cls(secrets.token_bytes(32), frames)


def frames_authenticated(conf) -> bool:
    """Whether a run on a SparkContext with this SparkConf authenticates every frame: where the
    user's Spark authenticates (or encrypts) its own connections."""
    return any((conf.get(name) or "false").strip().lower() == "true"
               for name in ("spark.authenticate", "spark.network.crypto.enabled"))


class Channel:
    """One authenticated connection: ``send``/``recv`` (pickles), ``send_bytes``/``recv_bytes``,
    ``poll``, and a ``fileno`` so that :func:`multiprocessing.connection.wait` selects it."""

    def __init__(self, sock: socket.socket, send_key: bytes | None, recv_key: bytes | None):
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock
        self._send_mac = None if send_key is None else hmac.new(send_key, digestmod="sha256")
        self._recv_mac = None if recv_key is None else hmac.new(recv_key, digestmod="sha256")
        self._sent = self._received = 0
        self._head = bytearray(_LENGTH.size + (0 if recv_key is None else _TAG))

    def fileno(self) -> int:
        return self._sock.fileno()

    @property
    def closed(self) -> bool:
        return self._sock.fileno() < 0

    def close(self) -> None:
        self._sock.close()

    def send_buffer(self) -> int:
        """Bytes the kernel takes from ``send_bytes`` without waiting for the other end to read."""
        return self._sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)

    def poll(self, timeout: float = 0.0) -> bool:
        return bool(wait([self], timeout))

    def send_bytes(self, payload) -> None:
        payload = memoryview(payload).cast("B")
        head = _LENGTH.pack(len(payload))
        if self._send_mac is not None:
            mac = self._send_mac.copy()
            mac.update(_LENGTH.pack(self._sent))
            mac.update(head)
            mac.update(payload)
            head += mac.digest()
            self._sent += 1
        if len(payload) <= _SMALL:
            self._sock.sendall(head + payload)
        else:
            self._sock.sendall(head)
            self._sock.sendall(payload)

    def recv_bytes(self, limit: int | None = None) -> bytearray:
        self._read_into(memoryview(self._head))
        length = _LENGTH.unpack_from(self._head)[0]
        if limit is not None and length > limit:
            raise FrameError(f"gopher: a frame of {length} bytes exceeds the limit of {limit} "
                             "(spark.goffish.maxFrameBytes)")
        payload = bytearray(length)
        self._read_into(memoryview(payload))
        if self._recv_mac is not None:
            mac = self._recv_mac.copy()
            mac.update(_LENGTH.pack(self._received))
            mac.update(self._head[:_LENGTH.size])
            mac.update(payload)
            if not hmac.compare_digest(mac.digest(), bytes(self._head[_LENGTH.size:])):
                raise FrameError("gopher: a frame failed its authentication (altered, replayed or out of "
                                 "order); the connection is dropped")
            self._received += 1
        return payload

    def send(self, obj) -> None:
        self.send_bytes(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))

    def recv(self):
        return pickle.loads(self.recv_bytes())

    def _read_into(self, view: memoryview) -> None:
        while len(view):
            got = self._sock.recv_into(view)
            if got == 0:
                raise EOFError("gopher: the connection was closed")
            view = view[got:]


class Readiness:
    """Which channels have something to read, on one poll set kept for a run's connections:
    :func:`multiprocessing.connection.wait` builds a selector per call (~10 us, several times
    every superstep); registering in a poll set is no system call (an epoll's is)."""

    def __init__(self):
        self._poll = select.poll()
        self._held: set = set()              # the file descriptors registered

    def each(self, channels: list, timeout: float | None = None):
        """Yield each of ``channels`` once, as it becomes readable (a channel yielded is not
        watched again: what it says next is for a later call); None after ``timeout`` seconds
        with none readable, so that the caller can look at something else and go on."""
        poll, held = self._poll, self._held
        for fd in held:                      # left by a call its caller did not finish
            poll.unregister(fd)
        held.clear()
        left = {}
        for channel in channels:
            left[channel.fileno()] = channel
            poll.register(channel.fileno(), select.POLLIN)
        held.update(left)
        wait = None if timeout is None else timeout * 1000
        while left:
            ready = poll.poll(wait)
            if not ready:
                yield None
            for fd, _ in ready:
                poll.unregister(fd)
                held.discard(fd)
                yield left.pop(fd)


# ------------------------------------------------------------------------------ the handshake

def _read_exact(sock: socket.socket, size: int, deadline: float) -> bytes:
    data = bytearray()
    while len(data) < size:
        left = deadline - time.monotonic()
        if left <= 0:
            raise HandshakeError("gopher: handshake timed out")
        sock.settimeout(left)
        try:
            chunk = sock.recv(size - len(data))
        except TimeoutError:
            raise HandshakeError("gopher: handshake timed out") from None
        if not chunk:
            raise HandshakeError("gopher: connection closed during the handshake")
        data += chunk
    return bytes(data)


def _proofs(run_key: RunKey, server_nonce: bytes, client_nonce: bytes) -> dict:
    nonces = server_nonce + client_nonce
    proof = {label: hmac.digest(run_key.key, label.encode() + nonces, "sha256")
             for label in ("client", "server", "to-server", "to-client")}
    if not run_key.frames:
        proof["to-server"] = proof["to-client"] = None
    return proof


def accept_handshake(sock: socket.socket, run_key: RunKey, timeout: float = HANDSHAKE_SECONDS) -> Channel:
    """The accepting side's handshake; raises HandshakeError (or OSError) for anything but a peer with the key."""
    deadline = time.monotonic() + timeout
    server_nonce = secrets.token_bytes(_NONCE)
    sock.settimeout(timeout)
    sock.sendall(_MAGIC + server_nonce)
    answer = _read_exact(sock, _NONCE + _TAG, deadline)
    proof = _proofs(run_key, server_nonce, answer[:_NONCE])
    if not hmac.compare_digest(answer[_NONCE:], proof["client"]):
        raise HandshakeError("gopher: a client without the run's key was refused")
    sock.sendall(proof["server"])
    return Channel(sock, proof["to-client"], proof["to-server"])


def connect(address, run_key: RunKey, timeout: float = HANDSHAKE_SECONDS) -> Channel:
    """Connect to a run's listener at ``address`` and prove the key both ways."""
    deadline = time.monotonic() + timeout
    sock = socket.create_connection(tuple(address), timeout=timeout)
    try:
        hello = _read_exact(sock, len(_MAGIC) + _NONCE, deadline)
        if hello[:len(_MAGIC)] != _MAGIC:
            raise HandshakeError(f"gopher: {tuple(address)} is not a Gopher run's listener")
        client_nonce = secrets.token_bytes(_NONCE)
        proof = _proofs(run_key, hello[len(_MAGIC):], client_nonce)
        sock.sendall(client_nonce + proof["client"])
        if not hmac.compare_digest(_read_exact(sock, _TAG, deadline), proof["server"]):
            raise HandshakeError(f"gopher: the listener at {tuple(address)} does not hold the run's key")
        return Channel(sock, proof["to-server"], proof["to-client"])
    except BaseException:
        sock.close()
        raise


class Listener:
    """Accepts connections on ``(host, any port)``; each one that passes the handshake is handed
    to ``on_channel`` (which must not block). Stray clients are dropped, each on its own thread."""

    def __init__(self, host: str, run_key: RunKey, on_channel, backlog: int = BACKLOG):
        self._run_key, self._on_channel = run_key, on_channel
        self._sock = socket.create_server((host, 0), backlog=backlog)
        self._sock.settimeout(0.2)          # the accept loop notices close() within this
        self.address = self._sock.getsockname()[:2]
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._accept_loop, daemon=True, name="gopher-listener")
        self._thread.start()

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                sock, _ = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._handshake, args=(sock,), daemon=True, name="gopher-handshake").start()

    def _handshake(self, sock: socket.socket) -> None:
        try:
            channel = accept_handshake(sock, self._run_key)
        except (OSError, HandshakeError):
            sock.close()
            return
        with self._lock:
            if not self._closed:
                self._on_channel(channel)
                return
        channel.close()

    def close(self) -> None:
        """Stop accepting; once this returns, ``on_channel`` is never called again. Shutting the
        socket down wakes a waiting ``accept`` at once (a run does not wait out its timeout)."""
        with self._lock:
            self._closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._thread.join()
        self._sock.close()
