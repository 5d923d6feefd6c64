"""Who reads the channel: the idle main thread itself, or a helper thread while a job runs.

An ``Execute`` that arrives while the main thread is idle is read by the main thread, which then
runs it at once: no thread hands it over (one wake-up per execution instead of two). While a job
runs (user code, a restore) the helper thread reads, so that interrupts, pings and tool replies
are still read; the main thread takes the role back when it is idle again.

The role moves between the threads only between reads, never inside one: the decoder (which
keeps the bytes of a partial frame) is used by one thread at a time. Neither thread runs signal
handlers while it reads: the helper is started with the interrupting signals blocked, and the
main thread blocks them outside user code
(:func:`~._channel.defer_signals_outside_user_code`), so a handler that raises (the interrupt's
``KeyboardInterrupt``, an alarm user code left behind) never lands between reading bytes and
decoding them, nor in the middle of a hand-over.

Hand-over: ``_helper_turn`` says who may read; ``_busy`` is set while the helper is in the middle
of a read. :meth:`give` hands the role over (waking the helper if it waits); :meth:`take` takes it
back at once unless the helper is mid-read, never waiting for the helper to be scheduled. The
helper waits in ``poll`` on the channel and an eventfd :meth:`take` writes, and reads only if the
role is still its own when it wakes; otherwise the main thread reads that data itself.
"""

from __future__ import annotations

import os
import select
import threading
import traceback
from collections.abc import Callable

from bridge_protocol import Message, ProtocolError

from bridge_sandbox_client._channel import Channel

__all__ = ["ChannelReader"]


class ChannelReader:
    """Reads the channel on whichever thread holds the role and dispatches every message.

    ``dispatch`` runs on the reading thread, in order; ``ended(reason)`` runs once when the
    channel ends (EOF, a broken socket, a bad frame), on the thread that saw it.
    """

    def __init__(
        self,
        channel: Channel,
        dispatch: Callable[[Message], None],
        ended: Callable[[str], None],
        log: Callable[[str], None],
    ) -> None:
        self._channel = channel
        self._dispatch = dispatch
        self._ended = ended
        self._log = log
        self._condition = threading.Condition()
        self._helper_turn = False
        self._busy = False
        self._over = False
        self._wake = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        self._helper: threading.Thread | None = None

    @property
    def over(self) -> bool:
        """True once the channel has ended (nothing more will be read)."""
        return self._over

    def start_helper(self) -> None:
        """Start the helper thread (call inside :func:`~._channel.signals_deferred`: it must
        inherit the blocked signals), and dispatch what the handshake read ahead."""
        for message in self._channel.take_early():
            self._dispatch(message)
        self._helper = threading.Thread(target=self._help, name="bridge-reader", daemon=True)
        self._helper.start()

    # --- main thread -------------------------------------------------------------------------

    def give(self) -> None:
        """Main thread, before a job runs: the helper reads until :meth:`take`."""
        with self._condition:
            if not self._helper_turn:
                self._helper_turn = True
                self._condition.notify_all()

    def take(self) -> None:
        """Main thread, when idle: take the role back (waits only while the helper is in the
        middle of a read)."""
        with self._condition:
            while self._busy and not self._over:
                self._condition.wait()
            if self._helper_turn:
                self._helper_turn = False
                # Out of its poll now rather than together with this thread when the next
                # frame arrives: that wake-up would compete with the read of it.
                os.eventfd_write(self._wake, 1)

    def read_once(self) -> None:
        """Main thread, holding the role: block for the next bytes and dispatch what they
        complete (possibly nothing, possibly several messages)."""
        self._read_and_dispatch()

    # --- helper thread -----------------------------------------------------------------------

    def _help(self) -> None:
        poller = select.poll()
        poller.register(self._channel.fileno(), select.POLLIN)
        poller.register(self._wake, select.POLLIN)
        condition = self._condition
        try:
            while True:
                with condition:
                    while not self._helper_turn and not self._over:
                        condition.wait()
                    if self._over:
                        return
                ready = [fd for fd, _ in poller.poll()]
                if self._wake in ready:
                    try:
                        os.eventfd_read(self._wake)
                    except BlockingIOError:
                        pass
                    if len(ready) == 1:
                        continue  # only the wake-up (maybe a stale one): nothing to read
                with condition:
                    if not self._helper_turn or self._over:
                        continue  # the main thread took the role back: it reads this
                    self._busy = True
                try:
                    alive = self._read_and_dispatch()
                finally:
                    with condition:
                        self._busy = False
                        condition.notify_all()
                if not alive:
                    return
        except Exception:  # top-level handler of the thread: the channel cannot be read any more
            self._end(f"internal error in the sandbox client:\n{traceback.format_exc()}")

    # --- either thread -----------------------------------------------------------------------

    def _read_and_dispatch(self) -> bool:
        """One read: False once the channel has ended."""
        if self._over:
            return False
        try:
            messages = self._channel.read_messages()
            if messages is None:
                self._end("the host closed the channel")
                return False
            for message in messages:
                self._dispatch(message)
        except ProtocolError as exc:
            self._end(f"protocol error from the host: {exc}", log=True)
            return False
        except OSError as exc:
            self._end(f"the channel failed: {exc}", log=not self._channel.closed)
            return False
        except Exception:  # the reader's top-level handler: log, then shut down cleanly
            self._end(f"internal error in the sandbox client:\n{traceback.format_exc()}", log=True)
            return False
        return True

    def _end(self, reason: str, *, log: bool = False) -> None:
        with self._condition:
            if self._over:
                return
            self._over = True
            self._condition.notify_all()
        if log:
            self._log(reason)
        self._ended(reason.split("\n", 1)[0].rstrip(":"))
