"""NetworkX's own tests through the ``goffish`` backend, with a count of who answered.

    python -m goffish.nx_conformance            # the modules of the functions the backend declares
    python -m goffish.nx_conformance networkx/algorithms/link_analysis/tests/test_pagerank.py -x

Runs pytest on NetworkX's installed test modules in NetworkX's backend test
mode (``NETWORKX_TEST_BACKEND=goffish``, ``NETWORKX_FALLBACK_TO_NX=True``: every
graph is converted to a GoFS store and each dispatched call runs on Spark unless
``can_run`` declines), and reports tests passed / failed / skipped and, for the
functions this backend declares, how many calls it ran and how many fell back to
NetworkX (with the reasons). Slow by design (a Spark run per call): a separate
command, not part of the test suite.
"""
from __future__ import annotations

import collections
import json
import logging
import os
import re
import sys
from pathlib import Path

MODULES = (
    "algorithms/components/tests/test_connected.py",
    "algorithms/components/tests/test_weakly_connected.py",
    "algorithms/link_analysis/tests/test_pagerank.py",
    "algorithms/shortest_paths/tests/test_unweighted.py",
    "algorithms/shortest_paths/tests/test_weighted.py",
    "algorithms/shortest_paths/tests/test_generic.py",
    "algorithms/centrality/tests/test_betweenness_centrality.py",
    "algorithms/community/tests/test_louvain.py",
    "algorithms/tests/test_tournament.py",
)
"""NetworkX test modules (relative to the installed package) of the functions the backend declares."""

_RAN = re.compile(r"Using backend 'goffish' for call to '(\w+)'")
_FELL_BACK = re.compile(r"Falling back to use 'networkx' instead of 'goffish' backend for call to '(\w+)'")
_DECLINED = re.compile(r"Backend 'goffish' can't run `(\w+)` with arguments: .*, because: (.*)$", re.S)


class CallCounter(logging.Handler):
    """Counts NetworkX's dispatch log lines about the goffish backend."""

    def __init__(self, declared: set[str]):
        super().__init__(logging.DEBUG)
        self.declared = declared
        self.ran: collections.Counter = collections.Counter()
        self.fell_back: collections.Counter = collections.Counter()
        self.reasons: collections.Counter = collections.Counter()

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        for pattern, counter in ((_RAN, self.ran), (_FELL_BACK, self.fell_back)):
            found = pattern.match(message)
            if found and found.group(1) in self.declared:
                counter[found.group(1)] += 1
        declined = _DECLINED.match(message)
        if declined and declined.group(1) in self.declared:
            self.reasons[f"{declined.group(1)}: {declined.group(2)[:120]}"] += 1


class Outcomes:
    """A pytest plugin that tallies test outcomes."""

    def __init__(self):
        self.counts: collections.Counter = collections.Counter()
        self.failed: list[str] = []

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            outcome = "xfailed" if hasattr(report, "wasxfail") and report.skipped else report.outcome
            self.counts[outcome] += 1
            if report.outcome == "failed":
                self.failed.append(report.nodeid)


def _own_quiet_session():
    """This command is an application: it starts the session the backend will use, quiet."""
    from goffish import cli_logging
    from goffish.session import session

    conf = cli_logging.quiet_conf({"spark.ui.showConsoleProgress": "false", "spark.sql.shuffle.partitions": "4"})
    cli_logging.quiet_session(session(master=os.environ.get("GOFFISH_MASTER", "local[2]"),
                                      app_name="goffish nx_conformance", conf=conf))


def main(argv=None) -> int:
    import networkx as nx
    import pytest

    from goffish.nx_info import declared_functions

    argv = list(sys.argv[1:] if argv is None else argv)
    root = Path(nx.__file__).parent
    paths = [a for a in argv if not a.startswith("-")] or list(MODULES)
    options = [a for a in argv if a.startswith("-")]
    targets = [str(p if Path(p).is_absolute() else root.parent / p if p.startswith("networkx/") else root / p)
               for p in paths]
    _own_quiet_session()
    os.environ["NETWORKX_TEST_BACKEND"] = "goffish"
    os.environ["NETWORKX_FALLBACK_TO_NX"] = "True"
    counter = CallCounter(set(declared_functions()))
    log = logging.getLogger("networkx.utils.backends")
    log.setLevel(logging.DEBUG)
    log.addHandler(counter)
    outcomes = Outcomes()
    code = pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", str(root), *options, *targets],
                       plugins=[outcomes])
    print(json.dumps({"tests": dict(outcomes.counts), "failed": outcomes.failed,
                      "goffish_ran": dict(counter.ran), "fell_back_to_networkx": dict(counter.fell_back),
                      "reasons_for_falling_back": dict(counter.reasons)}, indent=1))
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
