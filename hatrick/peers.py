"""Persistent channels between a stream's workers: one per (sender, receiver), frames in order.

A worker sends its boundary exchange's payloads (ghost labels, label pairs) to the others on
every batch, and moved buckets on a rescale. A connection per payload cost a thread, a TCP
connect and the two-way key handshake every time (~0.6 ms of CPU and four hops between the two
processes before the payload moved, measured in one process at load 7); a connection per pair of
workers, opened on first use and kept, costs that once. Each receiving worker reads every
incoming channel on its own thread into one queue (:class:`Mailbox`); each sending worker queues
its payloads to each peer on one thread (:class:`Outbox`), so two workers sending each other never
wait on one another, and a sender's payloads arrive in the order it sent them.
"""
from __future__ import annotations

import queue
import sys
import threading

from gopher.channel import Listener, connect


class Mailbox:
    """The payloads other workers send here, as they arrive: a listener on ``host`` whose
    channels (connections proving ``key``, a :class:`gopher.channel.RunKey`) are each read on a
    thread for as long as the sender keeps them open."""

    def __init__(self, host: str, key):
        self._arrived: queue.Queue = queue.Queue()
        self._listener = Listener(host, key, self._read)
        self.address = tuple(self._listener.address)

    def _read(self, channel) -> None:
        threading.Thread(target=self._drain, args=(channel,), daemon=True, name="hatrick-peer-in").start()

    def _drain(self, channel) -> None:
        try:
            while True:
                self._arrived.put(memoryview(channel.recv_bytes()))
        except (EOFError, OSError):
            return                                       # the sender closed it (or its process ended)
        finally:
            channel.close()

    def get(self, timeout: float) -> memoryview:
        """The next payload to arrive (raises queue.Empty after ``timeout`` seconds)."""
        return self._arrived.get(timeout=timeout)

    def close(self) -> None:
        """Stop taking new channels (open ones end when their senders close them)."""
        self._listener.close()


class Outbox:
    """Payloads for the worker listening at ``address``, sent in order over one channel that is
    opened on the first payload (and again after a failure) by one thread."""

    def __init__(self, address, key, name: str):
        self.address, self._key = tuple(address), key
        self._waiting: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)
        self._thread.start()

    def put(self, payload: bytes) -> None:
        self._waiting.put(payload)

    def _run(self) -> None:
        channel = None
        while (payload := self._waiting.get()) is not None:
            try:
                channel = channel or connect(self.address, self._key)
                channel.send_bytes(payload)
            except OSError as exc:                       # the peer is gone: its waiting ends in a timeout
                print(f"hatrick: a payload to the worker at {self.address} was not sent: {exc!r}", file=sys.stderr)
                if channel is not None:
                    channel.close()
                channel = None
        if channel is not None:
            channel.close()

    def close(self) -> None:
        """Send what is queued, then close the channel."""
        self._waiting.put(None)
        self._thread.join()
