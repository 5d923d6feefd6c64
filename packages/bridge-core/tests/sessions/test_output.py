"""Output capture: exact below the cap, head + marker + tail above it, the full text kept where
the sandbox reads it, shown made visible, and the disk it takes bounded and owned."""

from __future__ import annotations

from pathlib import Path

import pytest
from bridge_core.runtime.base import SharedDir
from bridge_core.sessions._output import OutputCollector, StreamCapture
from bridge_core.sessions._spill import FullOutputs, SpillFile, remove_dead_owners
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
        assert path.startswith("/run/bridge/output/")
        again = await manager.execute(f"size:{path}")
    total = len("FIRST\n") + lines * width + len("LAST\n")
    assert result.stdout.startswith("FIRST\n")
    assert result.stdout.endswith("LAST\n")
    assert f"{total:,} characters" in result.stdout
    assert len(result.stdout) < 4000 + 300  # the cap plus one marker
    assert any(path in n for n in result.notices)
    assert again.stdout == f"{total}\n"


async def test_full_output_file_holds_both_streams_in_arrival_order_read_only(
    harness: Harness,
) -> None:
    async with harness.manager(output_cap=10) as manager:
        result = await manager.execute("print:one-one-one\nerr:two-two-two\nprint:three")
        sandbox = harness.runtime.only()
        assert result.full_output_path is not None
        assert sandbox.read_shared(result.full_output_path) == b"one-one-one\ntwo-two-two\nthree\n"
        assert sandbox.shared_dir is not None
        (kept,) = (sandbox.shared_dir.host / "output").iterdir()
        assert kept.stat().st_mode & 0o777 == 0o444
    assert list((harness.state_dir / "output").iterdir()) == []  # the spill area goes with it


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
    assert not (harness.state_dir / "output").exists()  # nothing was spilled for nothing


async def test_full_output_is_not_kept_by_a_runtime_that_shares_no_directory(
    harness: Harness,
) -> None:
    harness.runtime.share = False
    async with harness.manager(output_cap=100) as manager:
        result = await manager.execute("flood:10x100")
    assert result.truncated
    assert result.full_output_path is None
    assert any("shares no directory" in n for n in result.notices)


async def test_a_host_that_cannot_store_the_full_output_still_returns_the_capped_result(
    harness: Harness,
) -> None:
    (harness.state_dir / "output").mkdir(parents=True)
    spill_area = FullOutputs(harness.state_dir / "output").area
    spill_area.write_text("a file where the spill directory should be")
    async with harness.manager(output_cap=100) as manager:
        result = await manager.execute("flood:50x100\nprint:end")
    assert result.status == "ok"
    assert result.truncated
    assert result.stdout.endswith("end\n")
    assert result.full_output_path is None
    assert any("could not store it" in n for n in result.notices)


async def test_control_bidi_and_zero_width_characters_are_shown_escaped(
    harness: Harness,
) -> None:
    raw = "\x1b[31mred\u202eevil\u200bhidden\ttab\r\nnext\rover"
    async with harness.manager(output_cap=1000) as manager:
        result = await manager.execute(f"raw:{raw!r}\nvalue:\x1b[0m")
    assert result.stdout == "\\x1b[31mred\\u202eevil\\u200bhidden\ttab\r\nnext\\rover"
    assert result.value == "\\x1b[0m"
    assert not result.truncated


async def test_escapes_count_against_the_cap_and_the_full_file_keeps_the_exact_bytes(
    harness: Harness,
) -> None:
    raw = "\x1b" * 400  # 400 characters, shown as 1,600
    async with harness.manager(output_cap=1000) as manager:
        result = await manager.execute(f"raw:{raw!r}")
        assert result.truncated
        assert result.full_output_path is not None
        kept = harness.runtime.only().read_shared(result.full_output_path)
    assert kept == raw.encode()
    assert len(result.stdout) < 1000 + 200
    assert "\x1b" not in result.stdout
    assert result.stdout.startswith("\\x1b")  # whole escapes at both cuts
    assert result.stdout.endswith("\\x1b")


async def test_kept_outputs_over_the_bridge_budget_delete_the_oldest_first(
    tmp_path: Path,
) -> None:
    outputs = FullOutputs(tmp_path / "spill", budget=250)
    shared = SharedDir(tmp_path / "sandbox", "/run/bridge")
    shared.host.mkdir()
    paths = []
    for n in range(3):
        spill = SpillFile(outputs, limit=1000)
        await spill.open()
        await spill.write(bytes([65 + n]) * 100)
        paths.append(await spill.keep(shared, f"{n}.txt"))
        await spill.aclose()
    names = sorted(p.name for p in (shared.host / "output").iterdir())
    assert names == ["1.txt", "2.txt"]  # the first went to make room for the third
    assert outputs.used == 200
    third = SpillFile(outputs, limit=1000)
    await third.open()
    await third.write(b"x" * 400)  # more than the whole budget: only the start is kept
    assert third.incomplete
    assert outputs.used == 250
    await third.aclose()
    assert outputs.used == 0  # its bytes came back, and the kept ones it displaced are gone


async def test_spill_directories_of_dead_owners_are_removed_and_live_ones_kept(
    tmp_path: Path,
) -> None:
    root = tmp_path / "spill"
    ours = FullOutputs(root)
    spill = SpillFile(ours, limit=1000)
    await spill.open()
    await spill.write(b"mine")
    await spill.flush()
    dead = root / "999999999-1"  # no such pid
    dead.mkdir()
    (dead / "spill-1.txt").write_bytes(b"x" * 1000)
    (root / "output-legacy.txt").write_bytes(b"from a bridge before owners were recorded")
    assert remove_dead_owners(root) == 2
    assert sorted(p.name for p in root.iterdir()) == [ours.area.name]
    assert spill.path is not None
    assert spill.path.read_bytes() == b"mine"
    await spill.aclose()


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
    spill = SpillFile(FullOutputs(tmp_path), limit=10**6)
    collector = OutputCollector(1000, spill)
    await collector.add("stdout", "o" * out)
    await collector.add("stderr", "e" * err)
    await collector.finish()
    stdout, stderr = collector.render("|")
    assert len(stdout.replace("|", "")) + len(stderr.replace("|", "")) == 1000
    assert (stdout.count("o") > 0) == (out > 0)  # a stream with output always shows some
    assert (stderr.count("e") > 0) == (err > 0)
    assert spill.size == out + err
    path = spill.path
    assert path is not None
    await collector.aclose()
    assert not path.exists()
