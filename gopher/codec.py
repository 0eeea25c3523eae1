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

import copyreg
import io
import pickle

import numpy as np

#: buffers smaller than this travel inside the header: a frame of its own costs more than the copy
OUT_OF_BAND_BYTES = 1 << 16


def _array(buffer, dtype: str, shape: tuple) -> np.ndarray:
    array = np.frombuffer(buffer, dtype)
    return array if len(shape) == 1 else array.reshape(shape)


def _reduce_array(array: np.ndarray):
    """A numeric array as its buffer, dtype string and shape: numpy's own reduction pickles a
    dtype object, which cost several times a small batch's numbers (a superstep's frames are
    mostly small arrays). A small array's buffer is a copy in the header (a frame of its own, or
    a call to decide, costs more than the copy); a large one's may travel out of band, a
    read-only one copied first: every array read back is writable."""
    numbers = not (array.dtype.hasobject or array.dtype.names is not None or not array.flags.c_contiguous)
    if numbers and array.nbytes < OUT_OF_BAND_BYTES:
        return _array, (bytearray(array.data), array.dtype.str, array.shape)
    if not array.flags.writeable:
        array = array.copy()
    if not numbers:
        return array.__reduce_ex__(5)
    return _array, (pickle.PickleBuffer(array), array.dtype.str, array.shape)


_DISPATCH = copyreg.dispatch_table.copy()
_DISPATCH[np.ndarray] = _reduce_array


def _pickle(value, buffer_callback=None) -> bytes:
    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=5, buffer_callback=buffer_callback)
    pickler.dispatch_table = _DISPATCH
    pickler.dump(value)
    return out.getvalue()


def to_frames(value) -> list:
    """``value`` as [header, buffer, buffer, ...] (large buffers are zero-copy views)."""
    buffers: list = []

    def out_of_band(buffer) -> bool:           # pickle keeps a buffer in band when this is true
        view = buffer.raw()
        if view.nbytes < OUT_OF_BAND_BYTES:
            return True
        buffers.append(view)
        return False

    header = _pickle(value, out_of_band)
    return [header, *buffers]


def from_frames(frames: list):
    return pickle.loads(frames[0], buffers=frames[1:])


def frames_size(frames: list) -> int:
    return sum(len(f) if isinstance(f, bytes) else f.nbytes for f in frames)


def dumps(value) -> bytes:
    return _pickle(value)


def loads(blob: bytes):
    return pickle.loads(blob)
