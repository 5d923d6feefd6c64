"""Settings shared by every test tree: the async backends the anyio tests run on, and how the
tests share pytest-xdist's workers.

``BRIDGE_ANYIO_BACKENDS=asyncio,trio`` runs each async test once per backend (default: asyncio
only). The code claims anyio-level portability; ``hatch run tests:trio`` holds the unit tests that
are backend-neutral to it.

Under pytest-xdist (``-n 2``, as ``hatch run tests:cov`` runs the suite) the unit tests spread
over the workers one by one, while a file of tests that start containers or the bridge's own
processes (marked ``container``, or under ``integration-tests/``) runs whole on one worker, in
order, as it does without xdist: its tests may share fixtures and build on each other's
leftovers checks. Two such files can run at once (one per worker), as CI's engine legs always
have: these tests use private services, ephemeral ports and per-bridge owner labels, and bound
their deadlines for a loaded 2-core machine. ``integration-tests/packaging`` is one unit: its
files share one release build.

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


_ROOT = Path(__file__).parent
_INTEGRATION = _ROOT / "integration-tests"
_ONE_UNIT = (_INTEGRATION / "packaging",)
"""Directories whose files share an expensive session fixture: scheduled as one unit."""


def _scheduling_unit(item: pytest.Item) -> str | None:
    """The xdist group of a test that must not be split from its file (``None``: any worker)."""
    inside = item.path.is_relative_to(_INTEGRATION)
    if not inside and item.get_closest_marker("container") is None:
        return None
    for directory in _ONE_UNIT:
        if item.path.is_relative_to(directory):
            return directory.relative_to(_ROOT).as_posix()
    return item.path.relative_to(_ROOT).as_posix()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("xdist"):
        return  # the marker is xdist's own (unknown, so refused by --strict-markers, without it)
    for item in items:
        if (unit := _scheduling_unit(item)) is not None:
            item.add_marker(pytest.mark.xdist_group(unit))


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
