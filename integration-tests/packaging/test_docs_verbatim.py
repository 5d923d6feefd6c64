"""Every shell step of README.md and docs/getting-started.md runs as written.

Each fenced ``bash`` block of those pages carries a marker naming the scenarios it belongs to:
``<!-- verbatim: build -->`` (run once, in this checkout, with the developer's environment: it is
the step that needs the clone and hatch), ``<!-- verbatim: pipx -->``, ``<!-- verbatim: uv -->``
(the two install routes; a block for both says ``pipx uv``), or ``<!-- not-run: REASON -->``. A
bash block without a marker fails the test, so a page cannot gain an untested step.

Per page and install route, the blocks of that route run line by line, in page order, from the
folder holding ``dist/`` (the checkout), as a user who never saw the repository: a scratch HOME,
no pip or uv configuration of this machine, and every HTTP(S) connection refused except for the
steps that download by design (``SUBSTITUTIONS`` says which). Each line must exit with status 0.

What is substituted, and why (nothing else is):

* ``mcp-code-execution-mode image build`` gets ``--slim --tag <a test tag>`` and the build path of
  the existing images (``--offline`` here, where no registry is reachable): the plain command
  replaces the image every concurrent test uses and builds the standard image (minutes of data
  stack downloads per run). The image built from an installation is compared with the checkout's
  in test_install.py. The later steps use that test image (``MCP_BRIDGE_IMAGE``), as a reader's
  use the default one.
* The ``build`` lines shared by both pages run once.

The scratch HOME has the folders of the clients the pages configure (Claude Desktop, Cursor), as
a reader who sets up a client has that client installed.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from bridge_image import builder

from .conftest import BUILD_TIMEOUT, REPO, developer_env, stranger_env

pytestmark = pytest.mark.container

PAGES = ("README.md", "docs/getting-started.md")
ROUTES = ("pipx", "uv")
_FENCE = re.compile(r"(?:<!--\s*(verbatim|not-run):\s*([^>]*?)\s*-->\s*\n)?```bash\n(.*?)```", re.S)
IMAGE_BUILD = "mcp-code-execution-mode image build"
CLIENT_FOLDERS = (".config/Claude", ".cursor")
"""Where Claude Desktop (Linux) and Cursor keep their config: the clients the pages set up."""
LINE_TIMEOUT = 900
"""Seconds for one documented step (an image build or doctor's first sandbox under load)."""


@dataclass(frozen=True)
class Block:
    page: str
    scenarios: tuple[str, ...]
    lines: tuple[str, ...]


def _blocks(page: str) -> list[Block]:
    text = (REPO / page).read_text(encoding="utf-8")
    found = []
    for kind, value, body in _FENCE.findall(text):
        lines = tuple(line.strip() for line in body.splitlines() if line.strip())
        if not kind:
            pytest.fail(f"{page}: a bash block has no verbatim/not-run marker: {lines[:1]}")
        found.append(Block(page, tuple(value.split()) if kind == "verbatim" else (), lines))
    return found


def test_every_shell_block_of_the_pages_is_marked_and_the_routes_are_complete() -> None:
    for page in PAGES:
        blocks = _blocks(page)
        scenarios = {s for b in blocks for s in b.scenarios}
        assert scenarios <= {"build", *ROUTES}, f"{page}: unknown scenario in {scenarios}"
        for route in ROUTES:
            installs = [b for b in blocks if route in b.scenarios and b.lines[0].startswith(route)]
            assert installs, f"{page} has no install step for {route}"


@pytest.fixture(scope="session")
def documented_release() -> Path:
    """The ``build`` steps of every page, once, in the checkout: they make ``dist/``."""
    done: set[str] = set()
    for page in PAGES:
        for block in _blocks(page):
            if "build" not in block.scenarios:
                continue
            for line in block.lines:
                if line in done:
                    continue
                ran = subprocess.run(
                    ["bash", "-c", line],
                    cwd=REPO,
                    env=developer_env(),
                    capture_output=True,
                    text=True,
                    check=False,
                    timeout=BUILD_TIMEOUT,
                )
                assert ran.returncode == 0, f"{page}: `{line}` failed:\n{ran.stderr[-3000:]}"
                done.add(line)
    assert (REPO / "dist").is_dir()
    return REPO / "dist"


@pytest.fixture(scope="module")
def test_image() -> Iterator[str]:
    """The tag the substituted ``image build`` steps build; removed afterwards."""
    tag = f"localhost/mcp-bridge-sandbox-slim:verbatim-{uuid.uuid4().hex[:10]}"
    yield tag
    # Untag first: `podman rmi` refused while a container the steps ran was still being removed,
    # and the tag was left behind. The image usually is the reproducible slim build other names
    # share; one left without a name is removed (podman refuses while a container uses it).
    found = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{.Id}}", tag],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    subprocess.run(["podman", "untag", tag, tag], capture_output=True, check=False)
    image_id = found.stdout.strip()
    if found.returncode == 0 and image_id:
        names = subprocess.run(
            ["podman", "image", "inspect", "--format", "{{len .RepoTags}}", image_id],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if names.stdout.strip() == "0":
            subprocess.run(["podman", "rmi", image_id], capture_output=True, check=False)


def _as_run(line: str, tag: str) -> tuple[str, bool]:
    """The command run for a documented ``line``, and whether it may use the network."""
    if line == IMAGE_BUILD:
        path = "--offline" if builder.default_offline() else "--no-offline"
        return f"{line} --slim {path} --tag {tag}", True
    return line, False


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("page", PAGES)
def test_the_documented_steps_run_as_written(
    page: str,
    route: str,
    documented_release: Path,
    test_image: str,
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    # The reader has the clients the pages configure installed: their folders exist (setup
    # refuses to invent a client's folder, which would hide a typo in the client's name).
    for client_folder in CLIENT_FOLDERS:
        (home / client_folder).mkdir(parents=True)
    steps = [line for b in _blocks(page) if route in b.scenarios for line in b.lines]
    assert steps, f"{page} has no steps for {route}"
    transcript = []
    for line in steps:
        command, network = _as_run(line, test_image)
        env = stranger_env(home, offline=not network, MCP_BRIDGE_IMAGE=test_image)
        ran = subprocess.run(
            ["bash", "-c", command],
            cwd=documented_release.parent,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=LINE_TIMEOUT,
        )
        transcript.append(f"$ {command}\n{ran.stdout[-2000:]}{ran.stderr[-2000:]}")
        assert ran.returncode == 0, f"{page} ({route}): `{line}` failed:\n" + "\n".join(transcript)
        if line.endswith(" doctor"):
            assert f"[ok]   image: {test_image}" in ran.stdout
            assert "[ok]   sandbox: ran code" in ran.stdout
    installed = home / ".local/bin/mcp-code-execution-mode"
    assert installed.resolve().is_relative_to(home), "the command is not the one just installed"
    if any(line.startswith("mcp-code-execution-mode setup claude-desktop") for line in steps):
        config = json.loads((home / ".config/Claude/claude_desktop_config.json").read_text())
        entry = config["mcpServers"]["code-execution"]
        assert entry["command"] == str(installed.resolve().parent / "python")
