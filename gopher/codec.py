"""The one record codec of the engine: pickle protocol 5.

Message batches are dicts of numpy arrays (plus any picklable sub-graph
payloads). Over a socket they travel as frames: a small pickled header and the
arrays' raw buffers out of band, so a numpy buffer is never copied element by
element. As a Spark record (the job-per-superstep transport, checkpoints) the
same object is one in-band blob.

Pickled data is trusted: it only ever comes from this run's own tasks (sockets
authenticated with the run's random key) or from the run's own directory. On a
shared cluster, turn on Spark's authentication and I/O encryption as for any
PySpark job.
"""
from __future__ import annotations

import pickle


#: buffers smaller than this travel inside the header: a frame of its own costs more than the copy
OUT_OF_BAND_BYTES = 1 << 16


def to_frames(value) -> list:
    """``value`` as [header, buffer, buffer, ...] (large buffers are zero-copy views)."""
    buffers: list = []

    def out_of_band(buffer) -> bool:           # pickle keeps a buffer in band when this is true
        view = buffer.raw()
        if view.nbytes < OUT_OF_BAND_BYTES:
            return True
        buffers.append(view)
        return False

    header = pickle.dumps(value, protocol=5, buffer_callback=out_of_band)
    return [header, *buffers]


def from_frames(frames: list):
    return pickle.loads(frames[0], buffers=frames[1:])


def frames_size(frames: list) -> int:
    return sum(len(f) if isinstance(f, bytes) else f.nbytes for f in frames)


def dumps(value) -> bytes:
    return pickle.dumps(value, protocol=5)


def loads(blob: bytes):
    return pickle.loads(blob)
