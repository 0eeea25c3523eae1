"""The ``goffish`` command line's progress: one quiet line, not Spark's bars among the results.

Spark's console progress bars (``[Stage 10:====>``) write to stderr whenever a
stage runs, in the middle of whatever the command prints. The CLI turns them
off in the session it starts (``spark.ui.showConsoleProgress=false``, unless
``--conf`` sets it) and shows progress itself through a :class:`StatusLine`:

- on a terminal, one line on stderr rewritten in place (the running Spark stage
  and its tasks, polled through ``SparkContext.statusTracker()``, or the
  current Gopher superstep), wiped before anything is written to stdout and
  when the command ends;
- elsewhere (a pipe, a file, a test), no stage polling, and progress messages
  such as Gopher's superstep lines as plain lines on stderr.

Only the CLI does this: it owns its process; a library caller's session and
streams are never touched.
"""
from __future__ import annotations

import shutil
import sys
import threading


class StatusLine:
    """One progress line on ``stream`` (stderr): rewritten in place on a terminal."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self._lock = threading.Lock()
        self._shown = False

    def show(self, text: str) -> None:
        """Show ``text`` as the current progress."""
        with self._lock:
            if not self.live:
                print(text, file=self.stream, flush=True)
                return
            width = max(20, shutil.get_terminal_size().columns - 1)
            self.stream.write("\r" + text[:width] + "\x1b[K")
            self.stream.flush()
            self._shown = True

    def clear(self) -> None:
        """Wipe the line (before other output, and at the end)."""
        with self._lock:
            if self._shown:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
                self._shown = False


class ClearingStream:
    """A text stream that wipes the status line before each write (the CLI's stdout on a terminal)."""

    def __init__(self, stream, status: StatusLine):
        self._stream, self._status = stream, status

    def write(self, text: str) -> int:
        self._status.clear()
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


class StagePoller:
    """Shows the running Spark stages on the status line, polling the public status tracker."""

    def __init__(self, spark, status: StatusLine, interval: float = 0.5):
        self._tracker = spark.sparkContext.statusTracker()
        self._status, self._interval = status, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="goffish-progress", daemon=True)

    def start(self) -> "StagePoller":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2 * self._interval)
        self._status.clear()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                stages = [self._tracker.getStageInfo(i) for i in self._tracker.getActiveStageIds()]
            except Exception:        # the session is stopping: nothing more to show
                return
            stages = [s for s in stages if s is not None]
            if stages:
                done = sum(s.numCompletedTasks for s in stages)
                total = sum(s.numTasks for s in stages)
                names = ", ".join(f"stage {s.stageId}" for s in stages[:3])
                self._status.show(f"[spark] {names}: {done}/{total} tasks")
            else:
                self._status.clear()
