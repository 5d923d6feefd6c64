"""Settings shared by every test tree: the async backends the anyio tests run on.

``BRIDGE_ANYIO_BACKENDS=asyncio,trio`` runs each async test once per backend (default: asyncio
only). The code claims anyio-level portability; ``hatch run tests:trio`` holds the unit tests that
are backend-neutral to it.
"""

from __future__ import annotations

import os

import pytest

_BACKENDS = [b for b in os.environ.get("BRIDGE_ANYIO_BACKENDS", "asyncio").split(",") if b]


@pytest.fixture(scope="session", params=_BACKENDS)
def anyio_backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend
