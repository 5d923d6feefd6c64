"""The data-science image: pandas and a matplotlib figure come back as a PNG display."""

from __future__ import annotations

import os
import subprocess

import pytest
from bridge_image.names import DATASCIENCE_IMAGE

from .conftest import MakeManager

pytestmark = pytest.mark.container

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def datascience_image() -> str:
    image = os.environ.get("MCP_BRIDGE_DATASCIENCE_IMAGE") or DATASCIENCE_IMAGE
    found = subprocess.run(["podman", "image", "exists", image], capture_output=True, timeout=30)
    if found.returncode != 0:
        reason = (
            f"data-science image {image} is not built "
            "(scripts/prepare-host --datascience, or BRIDGE_BUILD_DATASCIENCE=1)"
        )
        if os.environ.get("BRIDGE_REQUIRE_RUNTIME") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return image


async def test_open_matplotlib_figure_of_a_pandas_frame_comes_back_as_png(
    make_manager: MakeManager, datascience_image: str
) -> None:
    code = (
        "import pandas as pd, matplotlib.pyplot as plt\n"
        "df = pd.DataFrame({'month': [1, 1, 2], 'revenue': [3, 4, 5]})\n"
        "monthly = df.groupby('month')['revenue'].sum()\n"
        "plt.bar(monthly.index, monthly.values)\n"
        "plt.title('Monthly Revenue')\n"
        "print(monthly.to_dict())\n"
    )
    async with make_manager(image=datascience_image) as manager:
        result = await manager.execute(code, timeout=120)
    assert result.status == "ok", (result.error, result.stderr)
    assert result.stdout == "{1: 7, 2: 5}\n"
    assert len(result.images) == 1
    assert result.images[0].mime == "image/png"
    assert result.images[0].data.startswith(PNG_MAGIC)
