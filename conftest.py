"""Settings shared by every test tree: the async backends the anyio tests run on, and how the
tests share pytest-xdist's workers.

``BRIDGE_ANYIO_BACKENDS=asyncio,trio`` runs each async test once per backend (default: asyncio
only). The code claims anyio-level portability; ``hatch run tests:trio`` holds the unit tests that
are backend-neutral to it.

Under pytest-xdist (``-n 2 --dist loadfile``, as ``hatch run tests:cov`` runs the suite) each test
file runs whole on one worker, in order, as it does without xdist: a file of tests that start
containers or the bridge's own processes may share fixtures and build on each other's leftovers
checks. Two files run at once (one per worker), as CI's engine legs always have: these tests use
private services, ephemeral ports and per-bridge owner labels, and bound their deadlines for a
loaded 2-core machine. ``integration-tests/packaging`` is one unit: its files share one release
build, and one of them builds ``dist/`` in the checkout.

Why not xdist's ``loadgroup`` with a group marker per file, as before: pytest 9.2 derives a node's
id from its structured id, so the group suffix xdist 3.8 writes into ``item._nodeid`` never reaches
the scheduler and every test was spread alone (a CI run had two workers build ``dist/`` at once).
A scheduler of our own (:func:`pytest_xdist_make_scheduler`) reads the unit from the node id's path
instead, which both sides agree on.

``BRIDGE_FAILURES_AT_ONCE=1`` (``.ci/run`` sets it) prints each failure's report the moment the
test fails, not only in the summary at the end: a run stopped at its time limit, or a CI leg
still running beside another, shows what failed and why.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

_BACKENDS = [b for b in os.environ.get("BRIDGE_ANYIO_BACKENDS", "asyncio").split(",") if b]


_ONE_UNIT = ("integration-tests/packaging/",)
"""Directories (as node ids start) whose files share an expensive session fixture: one unit."""


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's per-file scheduling, with each of :data:`_ONE_UNIT` as one unit of work, for
    every load-balancing mode (a plain ``-n 2`` means ``--dist load``, which spread the tests
    of one file over both workers: the suite's files are not written for that)."""
    if config.getvalue("dist") not in ("load", "loadfile", "loadgroup"):
        return None
    from xdist.scheduler import LoadFileScheduling  # type: ignore[import-not-found,import-untyped,unused-ignore]

    class _FileUnits(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return next((unit for unit in _ONE_UNIT if path.startswith(unit)), path)

    return _FileUnits(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under ``integration-tests/`` is marked ``integration``: ``scripts/test`` runs the
    packages' host tests (``not container and not docker``) first, beside the host's
    preparation, and then ``container or docker or integration``, which is all the rest."""
    for item in items:
        if item.nodeid.startswith("integration-tests/"):
            item.add_marker(pytest.mark.integration)


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
