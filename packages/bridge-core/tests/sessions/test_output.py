"""Output capture: exact below the cap, head + marker + tail above it, full text in the sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest
from bridge_core.sessions._output import OutputCollector, StreamCapture
from hypothesis import given
from hypothesis import strategies as st

from .conftest import Harness


async def test_output_below_the_cap_is_returned_exactly(harness: Harness) -> None:
    text = "  leading\n\n\ttabs\t\n\n\ntrailing  "
    async with harness.manager(output_cap=1000) as manager:
        result = await manager.execute(f"raw:{text!r}\nerr:e")
    assert result.stdout == text
    assert result.stderr == "e\n"
    assert not result.truncated
    assert result.full_output_path is None


async def test_output_over_the_cap_keeps_head_and_tail_and_saves_the_full_text(
    harness: Harness,
) -> None:
    lines, width = 2000, 1000  # 2 MB in 2000 frames
    async with harness.manager(output_cap=4000) as manager:
        result = await manager.execute(f"print:FIRST\nflood:{lines}x{width}\nprint:LAST")
        assert result.truncated
        path = result.full_output_path
        assert path is not None
        assert path.startswith("/tmp/")
        again = await manager.execute(f"size:{path}")
    total = len("FIRST\n") + lines * width + len("LAST\n")
    assert result.stdout.startswith("FIRST\n")
    assert result.stdout.endswith("LAST\n")
    assert f"{total:,} characters" in result.stdout
    assert len(result.stdout) < 4000 + 300  # the cap plus one marker
    assert any(path in n for n in result.notices)
    assert again.stdout == f"{total}\n"


async def test_full_output_file_holds_both_streams_in_arrival_order(harness: Harness) -> None:
    async with harness.manager(output_cap=10) as manager:
        result = await manager.execute("print:one-one-one\nerr:two-two-two\nprint:three")
    sandbox = next(iter(harness.runtime.sandboxes.values()))
    assert result.full_output_path is not None
    assert sandbox.files[result.full_output_path] == b"one-one-one\ntwo-two-two\nthree\n"


async def test_a_small_stream_is_kept_whole_when_the_other_overflows(harness: Harness) -> None:
    async with harness.manager(output_cap=1000) as manager:
        result = await manager.execute("err:short warning\nflood:100x100")
    assert result.stderr == "short warning\n"
    assert "characters omitted" in result.stdout


async def test_full_output_is_not_kept_when_sessions_do_not_persist(harness: Harness) -> None:
    async with harness.manager(output_cap=100, persist=False) as manager:
        result = await manager.execute("flood:10x100")
    assert result.truncated
    assert result.full_output_path is None
    assert any("not kept" in n for n in result.notices)


async def test_a_host_that_cannot_store_the_full_output_still_returns_the_capped_result(
    harness: Harness,
) -> None:
    (harness.state_dir / "output").write_text("a file where the spill directory should be")
    async with harness.manager(output_cap=100) as manager:
        result = await manager.execute("flood:50x100\nprint:end")
    assert result.status == "ok"
    assert result.truncated
    assert result.stdout.endswith("end\n")
    assert result.full_output_path is None
    assert any("could not store it" in n for n in result.notices)


def test_stream_capture_memory_is_bounded_by_head_and_tail() -> None:
    capture = StreamCapture(100)
    for i in range(20_000):
        capture.add(f"line {i}\n")
    assert capture.head(1000).startswith("line 0\n")
    assert capture.tail(1000).endswith("line 19999\n")
    assert len(capture.head(10**6)) == 100
    assert len(capture.tail(10**6)) == 100
    assert capture.lines == 20_000


@given(st.lists(st.text(max_size=50), max_size=40), st.integers(min_value=1, max_value=60))
def test_stream_capture_is_exact_up_to_twice_its_keep(chunks: list[str], keep: int) -> None:
    capture = StreamCapture(keep)
    for chunk in chunks:
        capture.add(chunk)
    whole = "".join(chunks)
    assert capture.chars == len(whole)
    assert capture.head(keep) == whole[:keep]
    assert capture.tail(keep) == whole[keep:][-keep:]
    if len(whole) <= 2 * keep:
        assert capture.text() == whole


@pytest.mark.parametrize(("out", "err"), [(5000, 0), (0, 5000), (3000, 3000), (50, 5000)])
async def test_rendered_output_never_exceeds_the_cap_plus_markers(
    tmp_path: Path, out: int, err: int
) -> None:
    collector = OutputCollector(1000, tmp_path, spill_limit=10**6)
    await collector.add("stdout", "o" * out)
    await collector.add("stderr", "e" * err)
    stdout, stderr = collector.render("|")
    assert len(stdout.replace("|", "")) + len(stderr.replace("|", "")) == 1000
    assert (stdout.count("o") > 0) == (out > 0)  # a stream with output always shows some
    assert (stderr.count("e") > 0) == (err > 0)
    assert collector.spilled_bytes == out + err
    spill = collector.spill_path
    assert spill is not None
    await collector.aclose()
    assert not spill.exists()
