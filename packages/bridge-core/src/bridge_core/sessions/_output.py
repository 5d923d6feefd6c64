"""Bounded capture of one execution's output, shown made visible, with the full text spilled.

Memory stays bounded whatever the sandbox prints (10 MB, 200k lines): each stream keeps at most
``cap`` characters of head and ``cap`` characters of tail, exactly as received. While the total
is at most ``cap`` the chunks are also kept in arrival order; the moment it exceeds ``cap`` they go
to a :class:`~bridge_core.sessions._spill.SpillFile` and from then on every chunk is appended
there, as received (the exact bytes, for the full-output file).

What is returned is shown made visible (:mod:`bridge_core._visible`: control, bidi and zero-width
characters escaped), and the cap bounds what is *shown*: output whose escapes would make it
longer than ``cap`` is truncated like output that is longer to begin with.
"""

from __future__ import annotations

from collections import deque

from bridge_protocol import Stream

from bridge_core._visible import visible, visible_head, visible_tail
from bridge_core.sessions._spill import SpillFile

__all__ = ["OutputCollector", "StreamCapture"]

_STREAMS: tuple[Stream, Stream] = ("stdout", "stderr")


class StreamCapture:
    """Head and tail of one stream; exact while the stream is at most ``2 * keep`` characters."""

    def __init__(self, keep: int) -> None:
        self._keep = keep
        self._head: list[str] = []
        self._head_len = 0
        self._tail: deque[str] = deque()
        self._tail_len = 0
        self.chars = 0
        self.lines = 0

    @property
    def whole(self) -> bool:
        """True when :meth:`text` is everything the stream received."""
        return self.chars <= 2 * self._keep

    def add(self, text: str) -> None:
        self.chars += len(text)
        self.lines += text.count("\n")
        room = self._keep - self._head_len
        if room > 0:
            part = text[:room]
            self._head.append(part)
            self._head_len += len(part)
            text = text[room:]
        if not text:
            return
        if len(text) >= self._keep:
            self._tail.clear()
            text = text[-self._keep :]
            self._tail_len = 0
        self._tail.append(text)
        self._tail_len += len(text)
        # Trim from the left; only the oldest chunk is ever cut, so this is amortised O(1).
        while self._tail_len > self._keep:
            excess = self._tail_len - self._keep
            oldest = self._tail[0]
            if len(oldest) <= excess:
                self._tail.popleft()
                self._tail_len -= len(oldest)
            else:
                self._tail[0] = oldest[excess:]
                self._tail_len -= excess

    def text(self) -> str:
        """Everything, when nothing was dropped (:attr:`whole`)."""
        return "".join(self._head) + "".join(self._tail)

    def head(self, n: int) -> str:
        return "".join(self._head)[:n]

    def tail(self, n: int) -> str:
        return "".join(self._tail)[-n:] if n > 0 else ""


class OutputCollector:
    """stdout and stderr of one execution, shown in at most ``cap`` characters in total.

    ``spill`` receives the full output once it is longer than the cap (None: it is not kept).
    """

    def __init__(self, cap: int, spill: SpillFile | None = None) -> None:
        self.cap = cap
        self.streams: dict[Stream, StreamCapture] = {
            "stdout": StreamCapture(cap),
            "stderr": StreamCapture(cap),
        }
        self.spill = spill
        self._spilling = False
        self._ordered: list[str] | None = []
        """Arrival-ordered chunks while the total is within the cap (None once spilled)."""
        self._shown: dict[Stream, str] = {}
        """Visible text of the streams that are whole, computed once by :meth:`finish`."""
        self._finished = False

    @property
    def chars(self) -> int:
        return sum(capture.chars for capture in self.streams.values())

    @property
    def lines(self) -> int:
        return sum(capture.lines for capture in self.streams.values())

    @property
    def truncated(self) -> bool:
        """Whether what is shown had to be cut (final once :meth:`finish` ran)."""
        if self.chars > self.cap:
            return True
        return self._finished and sum(map(len, self._shown.values())) > self.cap

    async def add(self, stream: Stream, text: str) -> None:
        """Record a chunk (in arrival order across both streams)."""
        self.streams[stream].add(text)
        if self._ordered is not None:
            self._ordered.append(text)
            if self.chars > self.cap:
                await self._start_spill()
            return
        if self._spilling:
            assert self.spill is not None
            await self.spill.write(text.encode("utf-8", "surrogatepass"))

    async def _start_spill(self) -> None:
        # Crossing the cap: from now on the full text lives in a file, not in memory.
        pending, self._ordered = self._ordered or [], None
        if self.spill is None:
            return
        await self.spill.open()
        self._spilling = True
        for chunk in pending:
            await self.spill.write(chunk.encode("utf-8", "surrogatepass"))

    async def finish(self) -> None:
        """The execution is over: decide what is shown, and write what the spill still buffers.

        Output within the cap that its escapes make longer than the cap is truncated too, and
        spilled now (its chunks are still in memory).
        """
        if self._finished:
            return
        self._finished = True
        self._shown = {
            name: visible(capture.text()) for name, capture in self.streams.items() if capture.whole
        }
        if self.truncated and self._ordered is not None:
            await self._start_spill()
        if self.spill is not None:
            await self.spill.flush()

    def _shown_len(self, name: Stream) -> int:
        shown = self._shown.get(name)
        return len(shown) if shown is not None else self.streams[name].chars

    def render(self, marker: str) -> tuple[str, str]:
        """(stdout, stderr) as returned to the caller, made visible; ``marker`` is formatted per
        stream with ``omitted``, ``total`` and ``lines`` when that stream had to be cut."""
        if not self._finished:
            raise RuntimeError("render() before finish()")
        if not self.truncated:
            return self._shown["stdout"], self._shown["stderr"]
        out, err = self._shown_len("stdout"), self._shown_len("stderr")
        half = self.cap // 2
        if out <= half:
            budgets = (out, self.cap - out)
        elif err <= half:
            budgets = (self.cap - err, err)
        else:
            budgets = (half, self.cap - half)
        rendered: list[str] = []
        for name, budget in zip(_STREAMS, budgets, strict=True):
            if self._shown_len(name) <= budget:
                rendered.append(self._shown[name])
                continue
            rendered.append(self._cut(self.streams[name], budget, marker))
        return rendered[0], rendered[1]

    @staticmethod
    def _cut(capture: StreamCapture, budget: int, marker: str) -> str:
        head, head_raw = visible_head(capture.head(budget // 2), budget // 2)
        room = budget - len(head)
        # A whole stream (cut only because its escapes made it long) has no separate tail.
        rest = capture.text()[head_raw:] if capture.whole else capture.tail(room)
        tail, tail_raw = visible_tail(rest, room)
        note = marker.format(
            omitted=f"{capture.chars - head_raw - tail_raw:,}",
            total=f"{capture.chars:,}",
            lines=f"{capture.lines:,}",
        )
        return head + note + tail

    async def aclose(self) -> None:
        """Close the spill; it is deleted unless it was kept."""
        if self.spill is not None:
            await self.spill.aclose()
