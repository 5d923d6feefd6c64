"""Every Python example of the pages that shows code for ``run_python`` runs as written, against
the real bridge and the real MCP servers of ``scripts/prepare-servers`` (filesystem, memory,
time, everything).

Each fenced ``python`` block of :data:`PAGES` carries a marker on the line before it:

* ``<!-- run -->``: the block runs as it is;
* ``<!-- run: SCENARIO -->``: the block runs once the test has made what the prose around it
  assumes, and nothing else (:data:`SCENARIOS`: a file the code reads, names it uses);
* ``<!-- not-run: REASON -->``: a fragment, or code that needs something the tests cannot have.

A python block without a marker fails the test, so a page cannot gain an untested example.

The marked blocks of a page run in page order in one session of one bridge (a later block may
use names an earlier one defined), and each must end with status ``ok``. Where the page shows
what the code prints, in a ``text`` block right after it marked ``<!-- output -->``, the code's
output must be that text; ``...`` in it stands for any text (a time, a server's own wording).

The client approves every call the bridge asks about (a write of the filesystem server is
annotated destructive, and asks by default), as the reader of the page would.

One thing is substituted, and why: ``/data/`` in the code is the filesystem server's folder, a
fresh one under the test's temporary directory (the pages' readers have their own; the tests
cannot make ``/data``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client.session import ClientRequestContext

from .conftest import REPO, code_text, open_bridge, real_servers

PAGES = ("README.md", "docs/getting-started.md", "docs/sandbox-api.md")
_BLOCK = re.compile(
    r"(?:<!--\s*(run|not-run)(?::\s*([^>]*?))?\s*-->\s*\n)?```python\n(.*?)```"
    r"(?:\s*\n<!--\s*output\s*-->\s*\n```text\n(.*?)```)?",
    re.S,
)
DATA = "/data/"
"""The folder the pages' filesystem examples use; the filesystem server's folder in the test."""


@dataclass(frozen=True)
class Scenario:
    """What the prose around a block assumes exists before it runs."""

    host_files: Mapping[str, str] = field(default_factory=dict)
    """Files in the filesystem server's folder: name → text."""
    sandbox_setup: str = ""
    """Code run in the page's session just before the block (must end with status ok)."""


SCENARIOS = {
    # "read_file(path="/data/sales.csv")": the reader has a CSV there.
    "sales": Scenario(host_files={"sales.csv": "month,revenue\njan,120\nfeb,135\n"}),
    # A chart and a report the reader's code saved in /tmp before writing them out.
    "reports": Scenario(
        sandbox_setup=(
            "import matplotlib.pyplot as plt\n"
            "plt.bar(['jan', 'feb'], [120, 135])\n"
            "plt.savefig('/tmp/revenue.png')\n"
            "plt.close('all')\n"
            "with open('/tmp/report.txt', 'w') as f:\n"
            "    f.write('revenue: 255\\n')\n"
        )
    ),
    # "runtime.display_image("/tmp/chart.jpg")": a JPEG the reader saved.
    "chart": Scenario(
        sandbox_setup=(
            "import matplotlib.pyplot as plt\n"
            "plt.plot([1, 2, 3])\n"
            "plt.savefig('/tmp/chart.jpg')\n"
            "plt.close('all')\n"
        )
    ),
    # "for i, chunk in enumerate(chunks): process(chunk)": the reader's data and function.
    "chunks": Scenario(
        sandbox_setup="chunks = [list(range(i, i + 10)) for i in range(50)]\n"
        "def process(chunk):\n"
        "    return sum(chunk)\n"
    ),
}


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    marker: str  # "run" or "not-run"
    value: str  # the scenario or the reason
    code: str
    output: str | None

    def where(self) -> str:
        return f"{self.page}:{self.line}"


def _blocks(page: str) -> list[Block]:
    text = (REPO / page).read_text(encoding="utf-8")
    found = []
    for match in _BLOCK.finditer(text):
        marker, value, code, output = match.groups()
        line = text.count("\n", 0, match.start(3))
        found.append(Block(page, line, marker or "", value or "", code, output))
    return found


def _matches(shown: str, printed: str) -> bool:
    """``printed`` is ``shown``, where ``...`` in ``shown`` stands for any text."""
    pattern = ".*?".join(re.escape(part) for part in shown.strip().split("..."))
    return re.fullmatch(pattern, printed.strip(), re.S) is not None


def test_every_python_block_of_the_pages_is_marked_with_a_known_scenario() -> None:
    for page in PAGES:
        blocks = _blocks(page)
        assert blocks, f"{page} has no python block: drop it from PAGES"
        for block in blocks:
            assert block.marker, (
                f"{block.where()}: a python block has no <!-- run --> or <!-- not-run: REASON --> "
                f"marker: {block.code.splitlines()[:1]}"
            )
            if block.marker == "run":
                assert block.value in ("", *SCENARIOS), f"{block.where()}: {block.value!r}?"
            else:
                assert block.value, f"{block.where()}: not-run needs a reason"
                assert block.output is None, f"{block.where()}: output shown for a block not run"


async def _approve(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult:
    """The reader, asked to approve a call the page's code makes: yes."""
    return types.ElicitResult(action="accept")


def _status(result: Any) -> str:
    return str((result.structured_content or {}).get("status"))


def _texts(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def _images(result: Any) -> list[str]:
    return [block.mime_type for block in result.content if isinstance(block, types.ImageContent)]


def _check_scenario(name: str, block: Block, result: Any, data: Path) -> None:
    """What the prose says the block does, beyond running: checked where it is observable."""
    if name == "reports":
        # bytes cross as base64 text; text as it is.
        assert (data / "revenue.png").read_text(encoding="ascii").startswith("iVBORw0KGgo")
        assert (data / "report.txt").read_text(encoding="utf-8") == "revenue: 255\n"
    elif name == "chart":
        # The open figure as a PNG, the JPEG file, and the image the tool returned.
        assert sorted(_images(result)) == ["image/jpeg", "image/png", "image/png"], block.where()


@pytest.mark.container
@pytest.mark.parametrize("page", PAGES)
async def test_the_python_examples_of_the_page_run_as_written(
    page: str, tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    servers = real_servers(third_party, tmp_path)
    data = tmp_path / "data"
    blocks = [block for block in _blocks(page) if block.marker == "run"]
    assert blocks, f"{page} has no python block to run"
    for block in blocks:
        for name, text in SCENARIOS.get(block.value, Scenario()).host_files.items():
            (data / name).write_text(text, encoding="utf-8")
    options = {"elicitation_callback": _approve}
    async with open_bridge(tmp_path, servers=servers, client_options=options) as bridge:
        for block in blocks:
            scenario = SCENARIOS.get(block.value, Scenario())
            if scenario.sandbox_setup:
                setup = await bridge.run(scenario.sandbox_setup)
                assert _status(setup) == "ok", f"{block.where()} setup: {_texts(setup)}"
            result = await bridge.run(block.code.replace(DATA, f"{data}/"))
            assert _status(result) == "ok", f"{block.where()}: {_texts(result)}"
            if block.output is not None:
                printed = code_text(result)
                assert _matches(block.output, printed), (
                    f"{block.where()} prints:\n{printed}\nthe page shows:\n{block.output}"
                )
            if block.value:
                _check_scenario(block.value, block, result, data)
