"""The standard (default) image: the public page's examples run as written, figures come back.

The page users read shows pandas sessions, a pandas + matplotlib analysis and `jq` through
subprocess; all of them must work with the image the bridge uses by default.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess

import pytest
from bridge_image.names import DEFAULT_IMAGE, SLIM_IMAGE

from .conftest import MakeManager

_shared = importlib.import_module("integration-tests.conftest")

pytestmark = pytest.mark.container

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
DATA_STACK = (
    "numpy",
    "pandas",
    "pyarrow",
    "scipy",
    "sklearn",
    "matplotlib",
    "seaborn",
    "openpyxl",
    "yaml",
    "tabulate",
    "cloudpickle",
)


def test_the_default_image_is_the_standard_image(sandbox_image: str) -> None:
    # The suite runs against what users get: MCP_BRIDGE_IMAGE, else the bridge's default.
    assert (os.environ.get("MCP_BRIDGE_IMAGE") or DEFAULT_IMAGE) == sandbox_image


async def test_the_data_stack_imports_on_the_newest_debian_python(
    make_manager: MakeManager,
) -> None:
    code = (
        "import importlib, json, sys\n"
        f"mods = {DATA_STACK!r}\n"
        "print(json.dumps([sys.version_info[:2], [importlib.import_module(m).__name__ "
        "for m in mods]]))\n"
    )
    async with make_manager() as manager:
        result = await manager.execute(code, timeout=120)
    assert result.status == "ok", (result.error, result.stderr)
    version, imported = json.loads(result.stdout)
    assert version == [3, 13]
    assert imported == list(DATA_STACK)


async def test_the_pages_session_example_keeps_a_pandas_frame_and_a_csv_in_tmp(
    make_manager: MakeManager,
) -> None:
    async with make_manager() as manager:
        first = await manager.execute(
            "import pandas as pd\n"
            "df = pd.DataFrame({'col': [1, 2, 3]})\n"
            "df.to_csv('/tmp/data.csv', index=False)\n",
            timeout=120,
        )
        assert first.status == "ok", (first.error, first.stderr)
        second = await manager.execute(
            "import pandas as pd\ndf = pd.read_csv('/tmp/data.csv')\nprint(int(df.sum()['col']))\n",
            timeout=60,
        )
    assert second.status == "ok", (second.error, second.stderr)
    assert second.stdout == "6\n"


async def test_a_matplotlib_figure_of_a_pandas_frame_comes_back_as_png(
    make_manager: MakeManager,
) -> None:
    code = (
        "import pandas as pd, matplotlib.pyplot as plt\n"
        "df = pd.DataFrame({'month': [1, 1, 2], 'revenue': [3, 4, 5]})\n"
        "monthly = df.groupby('month')['revenue'].sum()\n"
        "plt.bar(monthly.index, monthly.values)\n"
        "plt.title('Monthly Revenue')\n"
        "plt.savefig('/tmp/revenue.png')\n"
        "print(monthly.to_dict())\n"
    )
    async with make_manager() as manager:
        result = await manager.execute(code, timeout=120)
    assert result.status == "ok", (result.error, result.stderr)
    assert result.stdout == "{1: 7, 2: 5}\n"
    assert len(result.images) == 1
    assert result.images[0].mime == "image/png"
    assert result.images[0].data.startswith(PNG_MAGIC)


async def test_the_pages_jq_example_runs_through_subprocess(make_manager: MakeManager) -> None:
    code = (
        "import subprocess\n"
        "out = subprocess.run(['jq', '.count'], input='{\"name\": \"test\", \"count\": 42}',\n"
        "                     capture_output=True, text=True)\n"
        "print(f'Count: {out.stdout.strip()}')\n"
    )
    async with make_manager() as manager:
        result = await manager.execute(code, timeout=60)
    assert result.status == "ok", (result.error, result.stderr)
    assert result.stdout == "Count: 42\n"


def test_the_slim_image_has_no_data_stack() -> None:
    image = os.environ.get("MCP_BRIDGE_SLIM_IMAGE") or SLIM_IMAGE
    found = subprocess.run(["podman", "image", "exists", image], capture_output=True, timeout=30)
    if found.returncode != 0:
        _shared.require_runtime(f"slim image {image} is not built (scripts/prepare-host builds it)")
    probe = subprocess.run(
        [
            "podman", "run", "--rm", "--network=none", "--entrypoint=python3", image,
            "-c", "import importlib.util as u; print(u.find_spec('pandas') is None)",
        ],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert probe.stdout.strip() == "True", probe.stderr
