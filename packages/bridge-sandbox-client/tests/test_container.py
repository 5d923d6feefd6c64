"""The client as the sandbox image runs it: uid 65534, read-only root, only /tmp writable."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

try:
    from bridge_image.names import DEFAULT_IMAGE
except ImportError:  # tox sandbox-bare: protocol and client alone, where no container test runs
    DEFAULT_IMAGE = ""

IMAGE = os.environ.get("BRIDGE_TEST_IMAGE", DEFAULT_IMAGE)
REQUIRED = os.environ.get("BRIDGE_REQUIRE_RUNTIME") == "1"
SOURCE = os.environ.get("BRIDGE_TEST_CLIENT_SOURCE")
"""Optional: a src directory mounted over the image's copy of the client (to test a working tree
against an image built earlier)."""

pytestmark = pytest.mark.container


def _image_available() -> bool:
    if shutil.which("podman") is None:
        return False
    probe = subprocess.run(
        ["podman", "image", "exists", IMAGE], capture_output=True, timeout=60, check=False
    )
    return probe.returncode == 0


@pytest.fixture
def container_host(unstarted_host: Any) -> Any:
    if not _image_available():
        if REQUIRED:
            pytest.fail(f"podman or the image {IMAGE} is missing (BRIDGE_REQUIRE_RUNTIME=1)")
        pytest.skip(f"podman or the image {IMAGE} is not available")
    directory = Path(unstarted_host.path).parent
    directory.chmod(0o777)  # the container's uid 65534 must reach the socket
    Path(unstarted_host.path).chmod(0o666)
    name = f"bsc-test-{uuid.uuid4().hex[:12]}"
    command = [
        "podman", "run", "--rm", "-i", f"--name={name}", "--init",
        "--user=65534:65534", "--read-only", "--read-only-tmpfs=false",
        "--tmpfs=/tmp:rw,size=64m,mode=1777", "--network=none", "--cap-drop=ALL",
        "--security-opt=no-new-privileges", "--pids-limit=64",
        f"--volume={directory}:/run/bridge",
    ]  # fmt: skip
    if SOURCE:
        command += [f"--volume={SOURCE}:/src:ro", "--env=PYTHONPATH=/src"]
    command.append(IMAGE)
    try:
        unstarted_host.start(command)
        yield unstarted_host
    finally:
        subprocess.run(["podman", "rm", "-f", "-t", "0", name], capture_output=True, check=False)


def test_client_runs_hardened_as_nobody_with_read_only_root(container_host: Any) -> None:
    host = container_host
    run = host.execute(
        "import os, subprocess\n"
        "subprocess.run(['id', '-u'])\n"
        "try:\n    open('/etc/probe', 'w')\nexcept OSError as e:\n    print(type(e).__name__)\n"
        "await mcp_servers['github'].create_issue(title='from container')"
    )
    assert run.result.status == "ok", run.result.error
    assert run.stdout == "65534\nOSError\n"
    assert run.result.value == "{'number': 7, 'title': 'from container'}"
    assert run.stderr == ""
    second = host.execute("import sys\nsys.version_info >= (3, 11)")
    assert second.result.value == "True"


def test_interrupt_and_images_work_in_the_container(container_host: Any) -> None:
    from bridge_protocol import Interrupt, Output, Result

    host = container_host
    execution_id = host.submit("print('started')\nwhile True:\n    pass")
    while not isinstance(host.next_message(), Output):
        pass
    host.send(Interrupt(execution_id=execution_id))
    result = host.wait_for(Result)
    assert result.status == "interrupted"
    run = host.execute(
        "import importlib.util\n"
        "plots = importlib.util.find_spec('matplotlib') is not None\n"
        "if plots:\n"
        "    import matplotlib.pyplot as plt\n"
        "    plt.plot([1, 2])\n"
        f"runtime.display_image({host.png!r})\n"
        "plots"
    )
    assert run.result.status == "ok", run.result.error
    assert run.stderr == ""
    assert all(d.data.startswith(b"\x89PNG") for d in run.displays)
    assert len(run.displays) == (2 if run.result.value == "True" else 1)


def test_a_durable_sandbox_loads_the_modules_of_its_saves_only_as_they_need_them(
    container_host: Any,
) -> None:
    # The idle session bench/density.py counts: restored empty, one cell, its state saved inline
    # with nothing of its own in /tmp. tarfile comes with the first /tmp to save, hashlib with
    # the first state a forked child saves (docs/decisions/0109).
    from bridge_protocol import Restore, Restored, Snapshot

    host = container_host
    probe = (
        "import sys\n"
        "[m for m in ('argparse', 'concurrent', 'hashlib', 'tarfile', 'shutil', 'pathlib')"
        " if m in sys.modules]"
    )

    def saved(code: str) -> Any:
        run = host.execute(code)
        assert run.result.status == "ok", run.result.error
        snapshot = host.wait_for(Snapshot)
        while not snapshot.last:
            snapshot = host.wait_for(Snapshot)
        assert snapshot.error == ""
        return host.execute(probe).result.value

    host.send(Restore("r1", last=True))
    assert host.wait_for(Restored).error == ""
    assert saved("x = 1") == "[]"
    assert saved("open('/tmp/note.txt', 'w').write('kept')") == "['tarfile', 'shutil']"
    large = "blob = b'x' * (1024 * 1024)"  # past the inline limit: a forked child saves it
    assert saved(large) == "['hashlib', 'tarfile', 'shutil']"
