"""What one sandbox may make the host hold at once: calls in flight, and the bytes they carry.

Every ``call`` or ``request`` frame becomes a task, an upstream request and several copies of its
arguments on the host (decoded, validated by the SDK, JSON-encoded for the server), none of which
the sandbox's memory limit covers. So each sandbox gets a budget: a number of calls in flight and
a number of bytes (the frames of their arguments while they run, then of their results until
they are sent). A call past either bound is refused at once with ``TOO_MANY_CALLS``, before any
of it is forwarded; nothing is queued on the host (``docs/decisions/0045``: a queue would hold the
very bytes being bounded, or stall the channel that also carries results and interrupts).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MAX_CALL_BYTES", "MAX_CALLS_IN_FLIGHT", "CallBudget", "CallLimits"]

MAX_CALLS_IN_FLIGHT = 256
"""Calls in flight per sandbox. Fixed, not a setting: each costs the host a task, an upstream
request and copies of its arguments that the sandbox's memory limit does not cover, so sandbox
code must not be able to raise it (256 is far past what a real fan-out needs)."""
MAX_CALL_BYTES = 32 * 1024 * 1024
"""Bytes of calls in flight per sandbox: two frames of the largest size. Fixed, not a setting,
for the same reason: it bounds host memory that no sandbox limit covers."""


@dataclass(frozen=True, slots=True)
class CallLimits:
    """The per-sandbox bounds (tests lower them; the bridge uses the constants)."""

    max_calls: int = MAX_CALLS_IN_FLIGHT
    max_bytes: int = MAX_CALL_BYTES


class CallBudget:
    """The running count of one sandbox's calls in flight and the bytes they hold."""

    def __init__(self, limits: CallLimits) -> None:
        self.limits = limits
        self.calls = 0
        self.bytes = 0

    def refusal(self, size: int) -> str | None:
        """Why a call of ``size`` bytes cannot start now, or None when it may.

        A single call larger than the byte bound still runs when nothing else is in flight (any
        frame the channel accepts can be one call); it then holds the budget alone.
        """
        limits = self.limits
        if self.calls >= limits.max_calls:
            return (
                f"{self.calls} calls are already in flight from this sandbox, the most the bridge "
                f"allows ({limits.max_calls}, a fixed bound)"
            )
        if self.calls and self.bytes + size > limits.max_bytes:
            return (
                f"the calls in flight from this sandbox already hold {self.bytes:,} bytes, and "
                f"this one's {size:,} would pass the bridge's bound "
                f"({limits.max_bytes:,} bytes, a fixed bound)"
            )
        return None

    def take(self, size: int) -> None:
        """Count a call that starts, holding ``size`` bytes."""
        self.calls += 1
        self.bytes += size

    def resize(self, held: int, size: int) -> None:
        """A call now holds ``size`` bytes instead of ``held`` (its result replaced its
        arguments). A result can push the total past the bound: new calls are then refused
        until it is sent."""
        self.bytes += size - held

    def release(self, held: int) -> None:
        """A call that held ``held`` bytes has ended."""
        self.calls -= 1
        self.bytes -= held
