"""Images and progress: display_image, matplotlib figures, runtime.progress."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


def test_progress_sends_progress_frames(host: Any) -> None:
    run = host.execute("runtime.progress(1, 3, 'rows')\nruntime.progress(0.5)")
    assert [(p.progress, p.total, p.message) for p in run.progress] == [
        (1.0, 3.0, "rows"),
        (0.5, None, None),
    ]
    assert all(p.execution_id == run.result.execution_id for p in run.progress)


def test_progress_rejects_non_numbers(host: Any) -> None:
    run = host.execute("runtime.progress('half')")
    assert run.result.error is not None
    assert run.result.error.type == "TypeError"


def test_display_image_sends_png_bytes(host: Any) -> None:
    png = host.png
    run = host.execute(f"from mcp import runtime\nruntime.display_image({png!r})")
    assert [(d.mime, d.data) for d in run.displays] == [("image/png", png)]


def test_display_image_reads_a_file_and_detects_jpeg(host: Any) -> None:
    jpeg = b"\xff\xd8\xff\xe0" + bytes(16)
    run = host.execute(
        f"with open('/tmp/bsc-test.jpg', 'wb') as f:\n    f.write({jpeg!r})\n"
        "runtime.display_image('/tmp/bsc-test.jpg')"
    )
    assert [(d.mime, d.data) for d in run.displays] == [("image/jpeg", jpeg)]


def test_display_image_accepts_an_image_returned_by_a_tool(host: Any) -> None:
    run = host.execute("runtime.display_image(await mcp_media.image())")
    assert [d.data for d in run.displays] == [host.png]


def test_display_image_of_unknown_bytes_asks_for_a_mime_type(host: Any) -> None:
    run = host.execute("runtime.display_image(b'not an image')")
    assert run.result.error is not None
    assert run.result.error.type == "ValueError"
    assert "mime" in run.result.error.message
    assert run.displays == []


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed in this environment")
def test_open_matplotlib_figure_is_sent_as_png_at_the_end(host: Any) -> None:
    run = host.execute(
        "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.title('t')\nprint('drawn')"
    )
    assert run.result.status == "ok", run.result.error
    assert run.stdout == "drawn\n"
    assert run.stderr == ""
    assert len(run.displays) == 1
    assert run.displays[0].mime == "image/png"
    assert run.displays[0].data.startswith(b"\x89PNG")
    # The figure was closed: the next execution sends nothing.
    assert host.execute("1").displays == []


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed in this environment")
def test_plt_show_sends_each_figure_once(host: Any) -> None:
    run = host.execute(
        "import matplotlib.pyplot as plt\n"
        "plt.figure(); plt.plot([1]); plt.show()\n"
        "plt.figure(); plt.plot([2])\n"
        "print('after show')"
    )
    assert run.result.status == "ok", run.result.error
    assert len(run.displays) == 2
    assert run.stderr == ""


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed in this environment")
def test_display_image_of_a_figure_sends_it_once(host: Any) -> None:
    run = host.execute(
        "import matplotlib.pyplot as plt\n"
        "from mcp import runtime\n"
        "fig, ax = plt.subplots(); ax.plot([1, 2])\n"
        "runtime.display_image(fig)\n"
        "fig.savefig('/tmp/bsc-fig.png')\n"
    )
    assert run.result.status == "ok", run.result.error
    assert len(run.displays) == 1
    assert run.displays[0].data.startswith(b"\x89PNG")


def test_progress_in_a_tight_loop_is_rate_limited_but_the_last_update_arrives(host: Any) -> None:
    run = host.execute("for i in range(20_000):\n    runtime.progress(i, message=f'item {i}')")
    assert 1 <= len(run.progress) < 2_000
    assert (run.progress[-1].progress, run.progress[-1].message) == (19_999.0, "item 19999")


def test_a_few_quick_progress_steps_all_arrive_in_order(host: Any) -> None:
    run = host.execute("for i in range(1, 4):\n    runtime.progress(i, 3, f'step {i}')")
    assert [(p.progress, p.total, p.message) for p in run.progress] == [
        (1.0, 3.0, "step 1"),
        (2.0, 3.0, "step 2"),
        (3.0, 3.0, "step 3"),
    ]
