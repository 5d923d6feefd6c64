"""A large state's numpy/pandas buffers that did not change are copied by the bridge from the
state it saved last, not sent again (protocol version 2): real podman, the standard image."""

from __future__ import annotations

from pathlib import Path

import pytest
from bridge_core.gateway import NullGateway
from bridge_core.runtime.podman import PodmanBackend
from bridge_core.sessions import SessionConfig, SessionManager, SessionStore, StoreSettings
from bridge_core.sessions._durable import DurableLink

pytestmark = [pytest.mark.engine, pytest.mark.container, pytest.mark.anyio]

MiB = 1024 * 1024
SETUP = (
    "import numpy as np, pandas as pd\n"
    "big = np.arange(3_000_000)\n"  # 24 MB
    "df = pd.DataFrame({'a': np.arange(500_000), 'b': np.linspace(0, 1, 500_000)})\n"
    "n = 0"
)
CHECK = "int(big.sum()), float(df['b'].sum()), len(df), n"


def _manager(backend: PodmanBackend, image: str, state: Path) -> SessionManager:
    return SessionManager(
        SessionConfig(image=image, pool_size=0),
        runtime=backend,
        gateway=NullGateway(),
        state_dir=state,
        store=SessionStore(state, StoreSettings(name="test")),
    )


def _link(manager: SessionManager) -> DurableLink:
    live = manager._table.sessions[(None, "default")].live
    assert live is not None
    assert live.durable is not None
    return live.durable


async def test_a_changed_small_name_beside_large_arrays_sends_only_the_small_part(
    podman_backend: PodmanBackend, sandbox_image: str, tmp_path: Path
) -> None:
    async with _manager(podman_backend, sandbox_image, tmp_path) as manager:
        assert (await manager.execute(SETUP, timeout=120)).ok
        expected = (await manager.execute(CHECK)).value or ""  # once SETUP's state is saved
        link = _link(manager)
        whole = link.bytes_sent
        assert whole > 24 * MiB
        for n in (1, 2, 3):
            assert (await manager.execute(f"n = {n}")).ok
        assert (await manager.execute("n")).value == "3"  # the last snapshot is on disk
        sent, copied = link.bytes_sent - whole, link.bytes_copied
    # Three changed states: each sent its small part and copied the arrays (~32 MB each).
    assert sent < 3 * MiB, sent
    assert copied > 3 * 30 * MiB, copied
    async with _manager(podman_backend, sandbox_image, tmp_path) as manager:
        back = await manager.execute(CHECK)
    assert back.value == expected.replace(", 0)", ", 3)"), (back, expected)
    assert "was restored from its state saved at" in " ".join(back.notices)
