"""The resident run's sockets (gopher.channel) under attack, without Spark: stray clients never
stall the listener, only holders of the run key get a connection, and authenticated frames
that are altered, replayed or spliced from another connection end the connection unread."""
from __future__ import annotations

import pickle
import queue
import socket
import time

import numpy as np
import pytest
from pyspark import SparkConf

from gopher.channel import (FrameError, HandshakeError, Listener, Readiness, RunKey, accept_handshake, connect,
                            frames_authenticated)


@pytest.fixture
def listening():
    """(listener, queue of accepted channels, key); the listener is closed afterwards."""
    arrived: queue.Queue = queue.Queue()
    key = RunKey.fresh(frames=True)
    listener = Listener("127.0.0.1", key, arrived.put)
    yield listener, arrived, key
    listener.close()
    while not arrived.empty():
        arrived.get_nowait().close()


def test_stray_clients_do_not_hold_up_the_peers_behind_them(listening):
    listener, arrived, key = listening
    silent = [socket.create_connection(listener.address) for _ in range(20)]      # more than the old backlog of 1
    socket.create_connection(listener.address).close()                              # a port scanner
    garbage = socket.create_connection(listener.address)
    garbage.sendall(b"\0" * 64)
    clock = time.monotonic()
    client = connect(listener.address, key)
    server = arrived.get(timeout=5)
    assert time.monotonic() - clock < 5          # not one handshake deadline (10 s) per stray client
    client.send(("hello", 1))
    assert server.recv() == ("hello", 1)
    assert arrived.empty()                   # no stray client became a channel
    for s in [*silent, garbage, client, server]:
        s.close()


def test_a_silent_client_is_dropped_after_the_handshake_deadline():
    a, b = socket.socketpair()
    clock = time.monotonic()
    with pytest.raises(HandshakeError, match="timed out"):
        accept_handshake(a, RunKey.fresh(False), timeout=0.3)
    assert 0.3 <= time.monotonic() - clock < 2
    a.close(), b.close()


def test_only_the_run_key_gets_a_connection(listening):
    listener, arrived, key = listening
    with pytest.raises(HandshakeError, match="closed during the handshake"):      # refused by the listener
        connect(listener.address, RunKey.fresh(frames=True))
    time.sleep(0.2)
    assert arrived.empty()


def _pair(frames: bool):
    """(server channel, client channel, the client's raw socket for the attacker) over loopback TCP."""
    arrived: queue.Queue = queue.Queue()
    key = RunKey.fresh(frames)
    listener = Listener("127.0.0.1", key, arrived.put)
    client = connect(listener.address, key)
    server = arrived.get(timeout=5)
    listener.close()
    return server, client, client._sock


@pytest.mark.parametrize("frames", [False, True])
def test_frames_round_trip_with_and_without_authentication(frames):
    server, client, _ = _pair(frames)
    big = np.arange(100_000, dtype=np.float64)
    client.send_bytes(big)
    client.send({"plan": [1, 2]})
    assert np.frombuffer(server.recv_bytes(), np.float64).tolist() == big.tolist()
    assert server.recv() == {"plan": [1, 2]}
    server.send("back")
    assert client.recv() == "back"
    client.send_bytes(b"x" * 11)
    with pytest.raises(FrameError, match="exceeds the limit of 10"):
        server.recv_bytes(10)


class _Bomb:
    def __reduce__(self):
        return (exec, ("raise SystemExit('unpickled an injected frame')",))


@pytest.mark.parametrize("attack", ["alter", "inject", "replay"])
def test_an_attacked_authenticated_frame_is_refused_before_unpickling(attack):
    server, client, raw = _pair(frames=True)
    client.send(("step", 1))
    frame = server._sock.recv(1 << 16)      # what went on the wire, taken off it unread; the attacker re-sends
    if attack == "alter":
        raw.sendall(frame[:-1] + bytes([frame[-1] ^ 1]))
    elif attack == "inject":
        payload = pickle.dumps(_Bomb())
        raw.sendall(len(payload).to_bytes(8, "little") + b"\0" * 32 + payload)
    else:
        raw.sendall(frame)                  # the same frame again: its sequence number is stale
    if attack == "replay":
        server._received = 1                # as if the captured frame had been read
    with pytest.raises(FrameError, match="failed its authentication"):
        server.recv()


def test_frames_are_authenticated_where_spark_authenticates():
    conf = SparkConf(loadDefaults=False)
    assert not frames_authenticated(conf)
    assert frames_authenticated(SparkConf(loadDefaults=False).set("spark.authenticate", "true"))
    assert frames_authenticated(SparkConf(loadDefaults=False).set("spark.network.crypto.enabled", "TRUE"))
    assert not frames_authenticated(SparkConf(loadDefaults=False).set("spark.authenticate", "false"))


def test_readiness_yields_each_channel_once_as_it_has_something_to_read(listening):
    """A superstep's gather: each channel once, in the order they speak; a channel that has
    answered and speaks again is left for the next gather; None when a timeout passes."""
    listener, arrived, key = listening
    clients = [connect(listener.address, key) for _ in range(3)]
    servers = [arrived.get(timeout=5) for _ in range(3)]
    readiness = Readiness()
    seen = []
    clients[2].send("first")
    for server in readiness.each(servers, timeout=0.05):
        if server is None:                   # nothing more yet: the next two speak, the first one twice
            assert seen == [servers[2]]
            clients[2].send("again")
            clients[0].send("second")
            clients[1].send("third")
            continue
        seen.append(server)
        assert server.recv() in ("first", "second", "third")
    assert sorted(map(id, seen)) == sorted(map(id, servers))
    assert [s.recv() for s in readiness.each([servers[2]])] == ["again"]
    for s in [*clients, *servers]:
        s.close()
