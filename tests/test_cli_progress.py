"""The CLI's one progress line: in place on a terminal, plain lines elsewhere, wiped before results."""
import io
import threading
import time

from goffish.cli_progress import ClearingStream, StagePoller, StatusLine


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_on_a_terminal_one_line_is_rewritten_and_wiped_before_results():
    err, out = Terminal(), io.StringIO()
    status = StatusLine(err)
    stdout = ClearingStream(out, status)
    status.show("[gopher] PageRank superstep 0")
    status.show("[gopher] PageRank superstep 1")
    stdout.write("result\n")
    assert err.getvalue() == ("\r[gopher] PageRank superstep 0\x1b[K\r[gopher] PageRank superstep 1\x1b[K"
                              "\r\x1b[K")
    assert out.getvalue() == "result\n"
    status.clear()                                  # nothing shown since: nothing to wipe
    assert err.getvalue().endswith("superstep 1\x1b[K\r\x1b[K")


def test_elsewhere_progress_is_plain_lines():
    err = io.StringIO()
    status = StatusLine(err)
    status.show("[gopher] ConnectedComponents superstep 0")
    status.clear()
    assert err.getvalue() == "[gopher] ConnectedComponents superstep 0\n"


def test_stage_poller_shows_running_spark_stages(spark):
    err = Terminal()
    status = StatusLine(err)
    poller = StagePoller(spark, status, interval=0.05).start()

    def slow(batches):
        for batch in batches:
            time.sleep(1.0)
            yield batch

    job = threading.Thread(target=lambda: spark.range(2, numPartitions=2).mapInPandas(slow, "id long").collect())
    job.start()
    job.join()
    poller.stop()
    assert "[spark] stage " in err.getvalue() and "/2 tasks" in err.getvalue()
    assert err.getvalue().endswith("\r\x1b[K")
