"""Sandbox code writing to the container's own stdio when the channel is that stdio
(``MCP_BRIDGE_CHANNEL=stdio``), through the real bridge over stdio (MCP SDK client) and real
podman.

The sandbox client moves its channel away from fds 0 and 1, but the container's init process
(pid 1, same uid) still holds the pipes conmon reads: ``/proc/1/fd/1`` is the channel's stdout
pipe and ``/proc/1/fd/2`` the stream the bridge keeps an 8 KiB tail of. Writing there gives
nothing the channel fd does not: bytes on fd 1 are channel bytes (judged by the decoder), and a
flood on fd 2 is read and dropped.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import (
    TEST_RUNTIME,
    bridge_pids,
    code_text,
    open_bridge,
    payload_of,
    peak_rss_mib,
    text_of,
)

pytestmark = [
    pytest.mark.engine,
    pytest.mark.container,
    pytest.mark.skipif(TEST_RUNTIME == "docker", reason="the stdio channel is podman's"),
]

STDERR_FLOOD = """
import os
fd = os.open("/proc/1/fd/2", os.O_WRONLY)
chunk = b"e" * 65536
for _ in range(3000):
    os.write(fd, chunk)
os.readlink("/proc/1/fd/1").startswith("pipe:")
"""

GARBAGE_ON_THE_CHANNEL_PIPE = """
import os
os.write(os.open("/proc/1/fd/1", os.O_WRONLY), b"\\xff" * 64)
"""


async def test_the_init_processs_stdio_gives_sandbox_code_nothing_the_channel_does_not(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path, env={"MCP_BRIDGE_CHANNEL": "stdio"}) as bridge:
        (pid,) = bridge_pids(bridge.state_dir)
        await bridge.run("kept = 'state'")
        before = peak_rss_mib(pid)
        flood = await bridge.run(STDERR_FLOOD, timeout=120)
        peak = peak_rss_mib(pid)
        garbage = await bridge.run(GARBAGE_ON_THE_CHANNEL_PIPE)
        after = await bridge.run("kept")
    print(f"bridge peak RSS {before:.0f} MiB before, {peak:.0f} MiB after 196 MB on pid 1's fd 2")
    assert code_text(flood) == "True"  # the flood was written and the channel still carries
    assert peak - before < 32
    assert payload_of(garbage)["status"] == "crashed"
    assert "protocol violation by the sandbox" in payload_of(garbage)["error"]["message"]
    assert text_of(after).endswith("'state'")  # a new sandbox, restored
