"""Settings shared by every test tree: the async backends the anyio tests run on, and how the
tests share pytest-xdist's workers.

``BRIDGE_ANYIO_BACKENDS=asyncio,trio`` runs each async test once per backend (default: asyncio
only). The code claims anyio-level portability; ``hatch run tests:trio`` holds the unit tests that
are backend-neutral to it.

Under pytest-xdist (``-n``, as ``hatch run tests:cov`` runs the suite) the unit tests spread over
the workers, while every test that starts containers or the bridge's own processes (marked
``container``, or under ``integration-tests/``) runs on one worker, in file order, as it does
without xdist: those tests share one podman, one image store and the machine's cores, and some
measure leftovers or deadlines that a second container test beside them would disturb.

``BRIDGE_FAILURES_AT_ONCE=1`` (``.ci/run`` sets it) prints each failure's report the moment the
test fails, not only in the summary at the end: a run stopped at its time limit, or a CI leg
still running beside another, shows what failed and why.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

_BACKENDS = [b for b in os.environ.get("BRIDGE_ANYIO_BACKENDS", "asyncio").split(",") if b]


_SERIAL_GROUP = "containers"
_INTEGRATION = Path(__file__).parent / "integration-tests"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("xdist"):
        return  # the marker is xdist's own (unknown, so refused by --strict-markers, without it)
    for item in items:
        if item.get_closest_marker("container") is not None or item.path.is_relative_to(
            _INTEGRATION
        ):
            item.add_marker(pytest.mark.xdist_group(_SERIAL_GROUP))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # an xdist worker: its controller gets the same report and prints it
    if report.failed and os.environ.get("BRIDGE_FAILURES_AT_ONCE") == "1":
        sys.stderr.write(f"\n---- FAILED {report.nodeid} ({report.when}) ----\n")
        sys.stderr.write(f"{report.longreprtext}\n---- end of {report.nodeid} ----\n")
        sys.stderr.flush()


@pytest.fixture(scope="session", params=_BACKENDS)
def anyio_backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend
