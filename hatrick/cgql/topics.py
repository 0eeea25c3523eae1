"""Topics: ordered, numbered event logs that subscribers read, resume and sink.

Every event published to a topic gets the next sequence number (``seq``,
from 0) and is kept, so a subscriber that saw up to ``seq = s`` resumes with
``from_seq=s + 1`` and gets every later event exactly once. Events are
delivered in publication order; a query publishes the events of one snapshot
at a time, in snapshot order, so a topic is time-ordered by construction.
A topic restored from a stream's checkpoint (see
:func:`hatrick.cgql.engine.restore_query`) numbers on from ``first_seq``; the
events before it were delivered by the process that crashed and are not kept.
``time_ordered=True`` further sorts the events of each publication by
(time, status, cluster/source/sink) so that equal runs give equal logs.

Sinks write files atomically (a temporary file renamed into place): a
directory sink writes one ``part-<first seq>-<last seq>`` file per
publication, and on restart resumes after the highest ``seq`` already on disk,
so nothing is lost or written twice. Kafka is used when the
``kafka-python`` connector is importable; otherwise :meth:`Topic.sink_kafka`
says so.
"""
from __future__ import annotations

import json
import os
import re
import threading
from typing import Callable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from gofs import files
from gofs.errors import InputError

__all__ = ["Topic", "Subscription"]

_PART = re.compile(r"^part-(\d{12})-(\d{12})\.(parquet|jsonl)$")


class Subscription:
    """A callback registered on a topic; ``cancel()`` stops further calls."""

    def __init__(self, topic: "Topic", callback: Callable, next_seq: int):
        self.topic, self.callback, self.next_seq = topic, callback, next_seq
        self.active = True

    def cancel(self) -> None:
        self.active = False
        self.topic._drop(self)


class Topic:
    """An ordered event log with sequence numbers; iterate it, subscribe to it, or sink it."""

    def __init__(self, name: str, time_ordered: bool = False, first_seq: int = 0):
        self.name, self.time_ordered = name, time_ordered
        self.first_seq = first_seq  # seqs before it were published before a restart (not kept here)
        self._events: list = []
        self._subscribers: list = []
        self._cond = threading.Condition()
        self._deliver = threading.RLock()
        self.closed = False
        self.error = None        # why the query stopped, if it failed
        self.query = None        # the registered query that publishes here (set by the engine)

    def __repr__(self) -> str:
        return f"Topic({self.name!r}, events={len(self._events)}, closed={self.closed})"

    def __len__(self) -> int:
        return len(self._events)

    @property
    def next_seq(self) -> int:
        return self.first_seq + len(self._events)

    def publish(self, events: list) -> list:
        """Number ``events`` (dicts) and deliver them; returns them with ``seq`` and ``topic`` set."""
        if not events:
            return []
        if self.time_ordered:
            events = sorted(events, key=_order_key)
        with self._deliver:
            with self._cond:
                if self.closed:
                    raise RuntimeError(f"topic {self.name!r} is closed")
                first = self.next_seq
                for i, e in enumerate(events):
                    e["seq"], e["topic"] = first + i, self.name
                self._events.extend(events)
                self._cond.notify_all()
            for sub in list(self._subscribers):
                self._catch_up(sub)
        return events

    def close(self) -> None:
        """No more events; iterators end once they have read everything."""
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def cancel(self) -> None:
        """Cancel the query publishing here (all its topics close)."""
        if self.query is not None:
            self.query.cancel()
        else:
            self.close()

    # reading ----------------------------------------------------------------------
    def read(self, from_seq: int = 0, limit: int | None = None) -> list:
        """Events with ``seq >= from_seq`` (at most ``limit``), without waiting."""
        with self._cond:
            start = max(from_seq - self.first_seq, 0)
            end = len(self._events) if limit is None else min(len(self._events), start + limit)
            return list(self._events[start:end])

    def __iter__(self) -> Iterator[dict]:
        return self.iterate()

    def iterate(self, from_seq: int = 0, timeout: float | None = None) -> Iterator[dict]:
        """Every event from ``from_seq`` on, waiting for new ones until the topic closes
        (or, with ``timeout``, until no event came for that many seconds)."""
        seq = max(from_seq - self.first_seq, 0)        # position in this process's events
        while True:
            with self._cond:
                if seq >= len(self._events) and not self.closed:
                    self._cond.wait_for(lambda: seq < len(self._events) or self.closed, timeout)
                if seq >= len(self._events):
                    return
                batch = self._events[seq:]
            yield from batch
            seq += len(batch)

    def subscribe(self, callback: Callable[[dict], None], from_seq: int = 0) -> Subscription:
        """Call ``callback(event)`` for every event from ``from_seq`` on, in order, each once."""
        sub = Subscription(self, callback, from_seq)
        with self._deliver:
            self._subscribers.append(sub)
            self._catch_up(sub)
        return sub

    def _catch_up(self, sub: Subscription) -> None:
        sub.next_seq = max(sub.next_seq, self.first_seq)
        while sub.active and sub.next_seq < self.next_seq:
            event = self._events[sub.next_seq - self.first_seq]
            sub.callback(event)
            sub.next_seq += 1

    def _drop(self, sub: Subscription) -> None:
        with self._deliver:
            if sub in self._subscribers:
                self._subscribers.remove(sub)

    # sinks ------------------------------------------------------------------------
    def to_json(self, path: str, from_seq: int = 0) -> int:
        """Write the events from ``from_seq`` as JSON lines to ``path`` atomically; returns how many."""
        events = self.read(from_seq)
        files.write_atomic(path, _jsonl(events).encode())
        return len(events)

    def to_parquet(self, path: str, from_seq: int = 0) -> int:
        """Write the events from ``from_seq`` to one Parquet file atomically; returns how many."""
        events = self.read(from_seq)
        files.write_atomic(path, write=lambda f: pq.write_table(events_table(events), f))
        return len(events)

    def sink(self, directory: str, format: str = "parquet") -> Subscription:  # noqa: A002 - like Spark's format
        """Keep writing new events to ``directory`` as ``part-<first>-<last>.parquet|jsonl`` files,
        resuming after the highest ``seq`` already there."""
        if format not in ("parquet", "json"):
            raise InputError(f"sink format {format!r}: choose 'parquet' or 'json'")
        os.makedirs(directory, exist_ok=True)
        ext = "parquet" if format == "parquet" else "jsonl"
        start = max((int(m.group(2)) + 1 for m in map(_PART.match, os.listdir(directory)) if m), default=0)
        pending: list = []

        def write(event):
            pending.append(event)
            if event["seq"] == self.next_seq - 1 or len(pending) >= 10_000:
                batch = list(pending)
                pending.clear()
                name = os.path.join(directory, f"part-{batch[0]['seq']:012d}-{batch[-1]['seq']:012d}.{ext}")
                if ext == "parquet":
                    files.write_atomic(name, write=lambda f: pq.write_table(events_table(batch), f))
                else:
                    files.write_atomic(name, _jsonl(batch).encode())

        return self.subscribe(write, from_seq=start)

    def sink_kafka(self, bootstrap_servers: str, kafka_topic: str | None = None, from_seq: int = 0) -> Subscription:
        """Send every event (JSON, key = seq) to a Kafka topic; needs the ``kafka-python`` package."""
        try:
            from kafka import KafkaProducer
        except ImportError:
            raise RuntimeError("Topic.sink_kafka needs the Kafka connector (pip install kafka-python); "
                               "use sink(directory) for Parquet/JSON files instead") from None
        producer = KafkaProducer(bootstrap_servers=bootstrap_servers)
        name = kafka_topic or self.name

        def send(event):
            producer.send(name, key=str(event["seq"]).encode(), value=json.dumps(event, default=str).encode())

        return self.subscribe(send, from_seq=from_seq)


def _order_key(event: dict):
    return (event.get("time", 0.0), event.get("status", ""), str(event.get("cluster", "")),
            str(event.get("source", "")), str(event.get("sink", "")))


def _jsonl(events: list) -> str:
    return "".join(json.dumps(e, default=str) + "\n" for e in events)


def events_table(events: list) -> pa.Table:
    """Events as an Arrow table: scalar fields as columns, lists/dicts as JSON strings."""
    rows = [{k: (json.dumps(v, default=str) if isinstance(v, (dict, list, tuple)) else v) for k, v in e.items()}
            for e in events]
    if not rows:
        return pa.table({"seq": pa.array([], pa.int64()), "time": pa.array([], pa.float64()),
                         "topic": pa.array([], pa.string()), "pattern": pa.array([], pa.string()),
                         "status": pa.array([], pa.string())})
    return pa.Table.from_pylist(rows)


