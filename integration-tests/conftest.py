"""Shared fixtures of the integration tests (real podman, real images, real processes).

* :func:`require_runtime` — call it when something a test needs (podman, the image, docker) is
  missing: a skip with the reason locally, a FAILURE when ``BRIDGE_REQUIRE_RUNTIME=1`` (CI), so
  CI can never go green by silently skipping its container tests.
* Tests marked ``container`` get that check automatically (podman binary + the sandbox image);
  tests marked ``docker`` are skipped when no docker daemon answers, a FAILURE when
  ``BRIDGE_REQUIRE_DOCKER=1`` (CI starts a daemon with ``scripts/prepare-docker``).
  :func:`require_docker` applies the same rule to anything else docker tests need.
* ``third_party`` — paths of the real third-party MCP servers installed by
  ``scripts/prepare-servers`` (same skip/fail rule when they are missing).
* ``sandbox_image`` — ``$MCP_BRIDGE_IMAGE``, default ``bridge_image``'s default tag.
* ``podman_backend`` — a :class:`~bridge_core.runtime.podman.PodmanBackend` with a private state
  dir, closed after the test, which also fails the test if a container it created is left.
* :func:`wait_until_removed` — wait for the runtime to delete containers (sandboxes are
  auto-removed once killed, which podman finishes after the backend or bridge has gone).
* :data:`TEST_RUNTIME` — where bridge-level tests (server, battery) put their sandboxes:
  ``BRIDGE_TEST_RUNTIME=docker`` runs them on docker (``.ci/run`` runs the battery so, after
  the podman run); the container helpers here then ask docker.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Iterable
from functools import cache
from pathlib import Path
from typing import Any, NoReturn

import anyio
import pytest
from anyio.streams.text import TextReceiveStream
from bridge_core.runtime.base import OWNER_LABEL
from bridge_core.runtime.podman import PodmanBackend
from bridge_image.names import DEFAULT_IMAGE

__all__ = [
    "REMOVAL_TIMEOUT",
    "TEST_RUNTIME",
    "require_docker",
    "require_runtime",
    "wait_until_removed",
]

REQUIRE_ENV = "BRIDGE_REQUIRE_RUNTIME"
REQUIRE_DOCKER_ENV = "BRIDGE_REQUIRE_DOCKER"
TEST_RUNTIME = os.environ.get("BRIDGE_TEST_RUNTIME") or "podman"
"""The runtime the bridge under test uses (``MCP_BRIDGE_RUNTIME``): podman or docker."""
if TEST_RUNTIME not in ("podman", "docker"):
    raise pytest.UsageError(f"BRIDGE_TEST_RUNTIME={TEST_RUNTIME!r}: use podman or docker")
_REMOVE_EVENTS = {"podman": "remove", "docker": "destroy"}
_EVENT_NAMES = {"podman": "{{.Name}}", "docker": "{{.Actor.Attributes.name}}"}
_PROBE_TIMEOUT = 30  # seconds for `podman image exists` / `docker version` (first use is slow)
REMOVAL_TIMEOUT = 120.0
"""Bound on podman deleting killed sandboxes: auto-removal of 128 took ~20 s on a loaded
2-core VM; a container still there after this is a leftover."""


def require_runtime(reason: str) -> NoReturn:
    """Skip (locally) or fail (``BRIDGE_REQUIRE_RUNTIME=1``) because ``reason`` is missing."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_ENV}=1: container tests must run here)")
    pytest.skip(reason)


def require_docker(reason: str) -> NoReturn:
    """Skip (docker is optional) or fail (``BRIDGE_REQUIRE_DOCKER=1``) because ``reason``."""
    if os.environ.get(REQUIRE_DOCKER_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_DOCKER_ENV}=1: docker tests must run here)")
    pytest.skip(f"{reason} (docker tests are optional)")


def _image() -> str:
    return os.environ.get("MCP_BRIDGE_IMAGE") or DEFAULT_IMAGE


@cache
def _podman_problem(image: str) -> str | None:
    podman = shutil.which("podman")
    if podman is None:
        return "podman is not installed (scripts/prepare-host installs it)"
    try:
        found = subprocess.run(
            [podman, "image", "exists", image], timeout=_PROBE_TIMEOUT, capture_output=True
        )
    except subprocess.TimeoutExpired:
        return f"`podman image exists {image}` hung for {_PROBE_TIMEOUT} s"
    if found.returncode != 0:
        return (
            f"sandbox image {image} is not built (run scripts/prepare-host, or "
            "mcp-code-execution-mode image build)"
        )
    return None


@cache
def _docker_problem() -> str | None:
    docker = shutil.which("docker")
    if docker is None:
        return "docker is not installed"
    try:
        answer = subprocess.run(
            [docker, "version", "--format", "{{.Server.Version}}"],
            timeout=_PROBE_TIMEOUT,
            capture_output=True,
        )
    except subprocess.TimeoutExpired:
        return "the docker daemon does not answer"
    if answer.returncode != 0:
        return "no docker daemon answers (scripts/prepare-docker starts one)"
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("docker") is not None:
        problem = _docker_problem()
        if problem is not None:
            require_docker(problem)
    elif item.get_closest_marker("container") is not None:
        problem = _podman_problem(_image())
        if problem is not None:
            require_runtime(problem)
        if TEST_RUNTIME == "docker" and (problem := _docker_problem()) is not None:
            require_docker(problem)


@pytest.fixture(scope="session")
def sandbox_image() -> str:
    """The sandbox image under test (``$MCP_BRIDGE_IMAGE`` or the default tag), present."""
    image = _image()
    problem = _podman_problem(image)
    if problem is not None:
        require_runtime(problem)
    return image


async def _our_containers(owner_label: str) -> set[str]:
    with anyio.fail_after(_PROBE_TIMEOUT):
        listed = await anyio.run_process(
            [
                "podman",
                "ps",
                "--all",
                "--format={{.Names}}",
                f"--filter=label={OWNER_LABEL}={owner_label}",
            ]
        )
    return set(listed.stdout.decode().split())


async def _existing(names: set[str], runtime: str) -> set[str]:
    with anyio.fail_after(_PROBE_TIMEOUT):
        listed = await anyio.run_process([runtime, "ps", "--all", "--format={{.Names}}"])
    return names & set(listed.stdout.decode().split())


async def wait_until_removed(
    names: Iterable[str], *, since: float, runtime: str = TEST_RUNTIME
) -> None:
    """Return once the runtime (:data:`TEST_RUNTIME`) has removed every container in ``names``
    (or after :data:`REMOVAL_TIMEOUT`); ``since``: a time before the first could be removed.

    Waits on the runtime's own removal events (replayed from ``since``), not on a sleep.
    ``podman events`` ends when podman rotates its event log: then it is started again.
    """
    pending = set(names)
    command = [
        runtime,
        "events",
        f"--since={int(since) - 1}",
        f"--filter=event={_REMOVE_EVENTS[runtime]}",
        f"--format={_EVENT_NAMES[runtime]}",
    ]
    with anyio.move_on_after(REMOVAL_TIMEOUT):
        while pending := await _existing(pending, runtime):
            async with await anyio.open_process(command, stderr=subprocess.DEVNULL) as events:
                assert events.stdout is not None
                buffered = ""
                async for chunk in TextReceiveStream(events.stdout):
                    *lines, buffered = (buffered + chunk).split("\n")
                    pending.difference_update(line.strip() for line in lines)
                    if not pending:
                        break
                with contextlib.suppress(ProcessLookupError):
                    events.kill()


REMOTE_VARIABLES = (
    "MCP_BRIDGE_RUNTIME_URL",
    "MCP_BRIDGE_RUNTIME_IDENTITY",
    "MCP_BRIDGE_RUNTIME_KNOWN_HOSTS",
    "MCP_BRIDGE_CHANNEL",
)
"""Where the engine is and how sandboxes talk (``scripts/prepare-remote`` prints them): set in
the environment, every podman test and every bridge started by a test uses them."""


def remote_settings() -> dict[str, Any]:
    """:meth:`PodmanBackend.connect` arguments from :data:`REMOTE_VARIABLES`."""
    env = os.environ
    found: dict[str, Any] = {}
    if url := env.get("MCP_BRIDGE_RUNTIME_URL"):
        found["url"] = url
    if identity := env.get("MCP_BRIDGE_RUNTIME_IDENTITY"):
        found["identity"] = Path(identity)
    if known_hosts := env.get("MCP_BRIDGE_RUNTIME_KNOWN_HOSTS"):
        found["known_hosts"] = Path(known_hosts)
    if (channel := env.get("MCP_BRIDGE_CHANNEL", "auto")) != "auto":
        found["channel"] = channel
    return found


@pytest.fixture
async def podman_backend(tmp_path: Path) -> AsyncIterator[PodmanBackend]:
    """A connected podman backend (private state dir); no container of it may outlive the test."""
    if (problem := _podman_problem(_image())) is not None:
        require_runtime(problem)
    backend = await PodmanBackend.connect(state_dir=tmp_path / "state", **remote_settings())
    owner = backend.owner.label
    before = await _our_containers(owner)
    try:
        yield backend
    finally:
        closed = time.time()
        await backend.aclose()
    await wait_until_removed(await _our_containers(owner) - before, since=closed)
    left = await _our_containers(owner) - before
    for name in left:  # clean up first, then fail: a failed test must not leak either
        await anyio.run_process(["podman", "rm", "--force", name], check=False)
    assert not left, f"containers left behind by the test: {sorted(left)}"


REPO = Path(__file__).resolve().parents[1]
SERVERS_ENV = Path(os.environ.get("MCP_TEST_SERVERS_DIR", REPO / ".cache" / "servers")) / "env"
"""Written by ``scripts/prepare-servers``: one ``export NAME=path`` line per third-party server."""


def _read_env_file(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.startswith("export "):
            name, _, raw = line.removeprefix("export ").partition("=")
            parts = shlex.split(raw)
            values[name] = parts[0] if parts else ""
    return values


@pytest.fixture(scope="session")
def third_party() -> dict[str, str]:
    """``{"MCP_SERVER_EVERYTHING": path, ...}`` as written by scripts/prepare-servers."""
    problem = None
    if not SERVERS_ENV.is_file():
        problem = f"{SERVERS_ENV} is missing: run scripts/prepare-servers"
    else:
        values = _read_env_file(SERVERS_ENV)
        missing = [name for name, path in values.items() if not Path(path).exists()]
        if missing:
            problem = (
                f"{', '.join(missing)} from {SERVERS_ENV} do not exist: "
                "re-run scripts/prepare-servers"
            )
    if problem is not None:
        require_runtime(problem)
    return values
