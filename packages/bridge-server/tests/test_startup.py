"""Start-up: the server answers ``initialize`` before the bridge behind it is open, and what it
imports for that is the SDK plus its own small modules, not the runtime backends."""

from __future__ import annotations

import subprocess
import sys
import threading

import anyio
from bridge_core.errors import ConfigError
from mcp import Client
from mcp_code_execution_mode._background import background_factory
from mcp_code_execution_mode.server import ExecutorFactory, create_server
from mcp_code_execution_mode.settings import Settings

from .conftest import FakeExecutor  # type: ignore[import-not-found]  # pytest (importlib mode) resolves it

NOT_BEFORE_INITIALIZE = (
    "podman",  # podman-py, and requests/urllib3 with it
    "requests",
    "rapidfuzz",  # the search index
    "snowballstemmer",
    "tomlkit",  # `setup`
    "bridge_protocol",  # the sandbox channel: first used by the first call
    "bridge_core.runtime.podman",
    "bridge_core.sessions.manager",
    "bridge_core.proxy",
    "bridge_core.catalog",
    "bridge_image.builder",
    "mcp_code_execution_mode._compose",
    "mcp_code_execution_mode.setup",
)


def test_what_serving_stdio_imports_leaves_out_the_bridge_behind_it() -> None:
    # Everything `serve` runs before it answers: parse the command line and the settings, set up
    # logging, build the server and its stdio transport. The rest loads in the background.
    probe = (
        "import sys\n"
        "from mcp_code_execution_mode import cli, serve, _background\n"
        "cli.build_parser().parse_args(['serve'])\n"
        "cli.load_settings({})\n"
        "serve.create_server(cli.Settings(), lambda: None)\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = set(done.stdout.split())
    assert "mcp_code_execution_mode.serve" in loaded
    assert [name for name in NOT_BEFORE_INITIALIZE if name in loaded] == []


async def test_initialize_and_tools_list_are_answered_while_the_bridge_is_still_opening(
    executor: FakeExecutor,
) -> None:
    release = threading.Event()

    def load() -> ExecutorFactory:
        release.wait(30)  # stands for the imports: a worker thread, the loop keeps serving
        return executor.factory()

    server = create_server(Settings(max_timeout=600), background_factory(load))
    with anyio.fail_after(20):
        async with Client(server, mode="legacy") as client:
            tools = (await client.list_tools()).tools
            assert executor.opened == 0  # the bridge was not open yet
            assert [tool.name for tool in tools] == ["run_python"]
            release.set()
            result = await client.call_tool("run_python", {"code": "1+1"})
    assert result.is_error is False
    assert executor.calls == [{"code": "1+1", "session": None, "timeout": None, "reset": False}]
    assert executor.closed == 1


async def test_a_bridge_that_cannot_open_answers_every_call_with_the_reason() -> None:
    def load() -> ExecutorFactory:
        raise ConfigError("state directory /nowhere (MCP_BRIDGE_STATE_DIR): not writable")

    server = create_server(Settings(max_timeout=600), background_factory(load))
    with anyio.fail_after(20):
        async with Client(server, mode="legacy") as client:
            first = await client.call_tool("run_python", {"code": "1+1"})
            second = await client.call_tool("run_python", {"code": "2+2"})
    for result in (first, second):
        assert result.is_error is True
        assert result.structured_content is not None
        assert "MCP_BRIDGE_STATE_DIR" in result.structured_content["error"]["message"]
