"""A restore's imports start before its state arrives: the bridge reads the module hint at the
head of a saved state (never the pickle) and names those modules in the sandbox's channel
directory before the container starts; a one-client bridge's warm pool imports the hints of its
saved sessions before any session claims a sandbox. Real podman, the real image."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from bridge_core.gateway import NullGateway
from bridge_core.runtime.podman import PodmanBackend
from bridge_core.sessions import SessionConfig, SessionManager, SessionStore, StoreSettings

pytestmark = pytest.mark.anyio

# fractions is in every image and not loaded by the sandbox client: a pickled Fraction names it.
SAVE = "from fractions import Fraction\nf = Fraction(1, 3)"
LOADED = "import sys; 'fractions' in sys.modules"
HINT_FILE = (
    "open('/run/bridge/preimport').read() "
    "if __import__('os').path.exists('/run/bridge/preimport') else ''"
)


def _skip_over_stdio(backend: PodmanBackend) -> None:
    if backend.channel == "stdio":
        pytest.skip(
            "a sandbox on a stdio channel (a remote engine) shares no channel directory: its "
            "restore's imports start with the state's first chunk (docs/sessions.md)"
        )


def _manager(
    backend: PodmanBackend,
    image: str,
    state: Path,
    *,
    pool: int,
    pool_preimport: bool = False,
    pool_imports: tuple[str, ...] = (),
) -> SessionManager:
    config = SessionConfig(
        image=image, pool_size=pool, pool_preimport=pool_preimport, pool_imports=pool_imports
    )
    return SessionManager(
        config,
        runtime=backend,
        gateway=NullGateway(),
        state_dir=state,
        store=SessionStore(state, StoreSettings(name="test")),
    )


async def _save_fraction_session(backend: PodmanBackend, image: str, state: Path) -> None:
    async with _manager(backend, image, state, pool=0) as manager:
        fresh = await manager.execute(LOADED, session="fresh")
        assert fresh.value == "False", "the sandbox client must not load fractions by itself"
        assert (await manager.execute(SAVE, session="data")).ok
        await manager.execute("1", session="data")  # runs once the state of SAVE is on disk


async def test_a_restored_sandbox_is_told_its_states_modules_before_it_starts(
    podman_backend: PodmanBackend, sandbox_image: str, tmp_path: Path
) -> None:
    _skip_over_stdio(podman_backend)
    await _save_fraction_session(podman_backend, sandbox_image, tmp_path)
    async with _manager(podman_backend, sandbox_image, tmp_path, pool=0) as manager:
        back = await manager.execute(f"str(f), {HINT_FILE}", session="data")
        other = await manager.execute(f"{LOADED}, {HINT_FILE}", session="new")
    assert back.value == "('1/3', 'fractions')", back
    assert "was restored from its state saved at" in " ".join(back.notices)
    assert other.value == "(False, '')", "a session with nothing saved is told nothing"


async def test_a_one_client_bridges_warm_pool_imports_its_saved_sessions_modules(
    podman_backend: PodmanBackend, sandbox_image: str, tmp_path: Path
) -> None:
    _skip_over_stdio(podman_backend)
    await _save_fraction_session(podman_backend, sandbox_image, tmp_path)
    for preimport, expected in ((True, "True"), (False, "False")):
        async with _manager(
            podman_backend, sandbox_image, tmp_path, pool=1, pool_preimport=preimport
        ) as manager:
            with anyio.fail_after(120):
                await manager.wait_warm()
            # A new session takes the warm sandbox: it was started before anyone claimed it.
            fresh = await manager.execute(LOADED, session="another")
            back = await manager.execute("str(f)", session="data")
        assert fresh.value == expected, (preimport, fresh)
        assert back.value == "'1/3'", back


async def test_a_warm_pool_imports_the_modules_its_settings_name_on_any_bridge(
    podman_backend: PodmanBackend, sandbox_image: str, tmp_path: Path
) -> None:
    # MCP_BRIDGE_POOL_IMPORTS: an HTTP bridge's pool (no saved sessions' modules) imports what
    # whoever runs the bridge names, which tells no client anything about another's sessions.
    _skip_over_stdio(podman_backend)
    async with _manager(
        podman_backend, sandbox_image, tmp_path, pool=1, pool_imports=("fractions", "nosuchmod")
    ) as manager:
        with anyio.fail_after(120):
            await manager.wait_warm()
        fresh = await manager.execute(f"{LOADED}, {HINT_FILE}", session="any")
    assert fresh.value == "(True, 'fractions\\nnosuchmod')", fresh
