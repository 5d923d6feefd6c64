"""The sans-IO line splitter both stdio directions share (``bridge_core.jsonlines``)."""

from __future__ import annotations

from bridge_core.jsonlines import OVERLONG, LineSplitter, Overlong
from hypothesis import given
from hypothesis import strategies as st


def _all(splitter: LineSplitter) -> list[bytes | Overlong]:
    out: list[bytes | Overlong] = []
    while (line := splitter.next()) is not None:
        out.append(line if line is OVERLONG else bytes(line))
    return out


@given(
    lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=20),
    cuts=st.lists(st.integers(min_value=0, max_value=900), max_size=10),
    last=st.binary(max_size=10).map(lambda b: b.replace(b"\n", b"")),
)
def test_any_chunking_gives_the_lines_and_the_unterminated_rest(
    lines: list[bytes], cuts: list[int], last: bytes
) -> None:
    data = b"".join(line + b"\n" for line in lines) + last
    splitter = LineSplitter(64)
    seen: list[bytes | Overlong] = []
    start = 0
    for cut in [*sorted(cuts), len(data)]:
        splitter.feed(data[start:cut])
        start = max(start, cut)
        seen += _all(splitter)
    assert seen == lines
    rest = splitter.end()
    assert (bytes(rest) if rest is not None else b"") == last


def test_a_line_past_the_bound_is_reported_at_once_then_dropped_to_its_newline() -> None:
    splitter = LineSplitter(16)
    splitter.feed(b"short\n" + b"x" * 17)
    assert _all(splitter) == [b"short", OVERLONG]  # before its newline came
    assert splitter.buffered == 0
    splitter.feed(b"x" * 1000)  # still the same line: nothing is kept
    assert splitter.buffered == 0
    assert _all(splitter) == []
    splitter.feed(b'xx\n{"next": 1}\n')
    assert _all(splitter) == [b'{"next": 1}']
    assert splitter.end() is None


def test_a_line_whose_newline_came_with_the_bytes_past_the_bound_is_reported_once() -> None:
    splitter = LineSplitter(10)
    splitter.feed(b"y" * 20 + b"\nafter\n")
    assert _all(splitter) == [OVERLONG, b"after"]


def test_an_over_long_last_line_is_not_returned_at_the_end() -> None:
    splitter = LineSplitter(10)
    splitter.feed(b"z" * 30)
    assert _all(splitter) == [OVERLONG]
    assert splitter.end() is None
