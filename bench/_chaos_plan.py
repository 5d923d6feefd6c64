"""The seeded plan of a chaos run: what each execution runs, and which answers are right.

Every execution computes a value from its own seed inside the sandbox, so a wrong, stale or
swapped answer is detected. Faults ride on some executions: an upstream server that crashes or
hangs mid-call, a container killed from outside, a client that cancels. For each kind the set
of acceptable outcomes is explicit; anything else is a wrong answer.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

__all__ = ["KINDS", "Outcome", "Step", "describe", "judge", "plan"]

EXEC_TIMEOUT = 20.0
"""``timeout`` of ordinary executions: generous (a container may have to start under load)."""
HANG_TIMEOUT = 3.0
"""``timeout`` of executions whose tool call hangs: the bridge must interrupt them on time."""
SLOW_SECONDS = 3.0
"""How long the code of a kill or cancel execution runs, so the fault lands while it runs."""

KINDS: dict[str, float] = {
    "compute": 0.55,
    "tool": 0.18,
    "crash": 0.04,
    "hang": 0.07,
    "kill": 0.08,
    "cancel": 0.08,
}
"""Share of each kind of execution."""

TOOL_FAILURES = frozenset({"UpstreamUnavailable", "ToolTimeout", "ToolCancelled"})
"""Clear errors a tool call may end with while its upstream is crashing or cooling down."""


@dataclass(frozen=True)
class Step:
    """One execution of the plan."""

    index: int
    session: str
    kind: str
    code: str
    expected: str
    """The line the code prints last when it ran to the end."""
    timeout: float
    """The ``timeout`` argument sent (cancel: the client's read timeout instead)."""
    server: str = ""
    token: str = ""
    fault_delay: float = 0.0
    """Seconds after the call starts when the fault (kill, cancel) is injected."""


@dataclass
class Outcome:
    """What came back for one step."""

    status: str
    """run_python's status, or ``cancelled`` (client cancel) or ``transport`` (no answer)."""
    stdout: str = ""
    error_type: str = ""
    error: str = ""
    elapsed: float = 0.0
    sandbox_start: float = 0.0
    """Seconds the call waited for a sandbox to start (not part of its timeout)."""
    killed_meanwhile: bool = False


def _value_code(rng: random.Random) -> tuple[str, str]:
    count, modulus = rng.randint(1_000, 40_000), rng.randint(1_000, 10**9)
    expected = sum(k * k for k in range(count)) % modulus
    return f"print(sum(k * k for k in range({count})) % {modulus})", str(expected)


def _slow(code: str) -> str:
    steps = int(SLOW_SECONDS / 0.05)
    return f"import time\nfor _ in range({steps}):\n    time.sleep(0.05)\n{code}"


def _tool_call(call: str) -> str:
    return (
        "from mcp import mcp_servers\n"
        "try:\n"
        f"    answer = await {call}\n"
        "    print('tool', repr(answer))\n"
        "except Exception as exc:\n"
        "    print('tool-error', type(exc).__name__)\n"
    )


def plan(seed: int, executions: int, sessions: int, servers: tuple[str, ...]) -> list[Step]:
    """The executions of a run, in order; ``servers`` are the upstreams configured."""
    rng = random.Random(seed)
    kinds, weights = zip(*KINDS.items(), strict=True)
    steps = []
    for index in range(executions):
        kind = rng.choices(kinds, weights)[0]
        session = f"chaos-{index % sessions}"
        value_code, expected = _value_code(rng)
        token = f"t{seed}-{index}-{rng.getrandbits(32):08x}"
        server, code, timeout, delay = "", value_code, EXEC_TIMEOUT, 0.0
        if kind == "tool":
            server = rng.choice(servers)
            call = (
                f"mcp_servers['probe'].echo(text={token!r})"
                if server == "probe"
                else f"mcp_servers['everything'].echo(message={token!r})"
            )
            code = _tool_call(call) + value_code
        elif kind == "crash":
            server = "probe"
            call = "mcp_servers['probe'].crash(status=3, message='chaos: crash on purpose')"
            code = _tool_call(call) + value_code
        elif kind == "hang":
            server, timeout = "probe", HANG_TIMEOUT
            code = _tool_call("mcp_servers['probe'].hang()") + value_code
        elif kind in ("kill", "cancel"):
            code = _slow(value_code)
            delay = rng.uniform(0.3, SLOW_SECONDS - 0.5)
            if kind == "cancel":
                timeout = delay
        steps.append(Step(index, session, kind, code, expected, timeout, server, token, delay))
    return steps


def _tool_line_ok(step: Step, line: str) -> bool:
    if line.startswith("tool-error "):
        return line.removeprefix("tool-error ") in TOOL_FAILURES
    if step.server == "probe":
        return line == f"tool {step.token!r}"
    return line == f"tool 'Echo: {step.token}'"


def judge(step: Step, outcome: Outcome) -> str | None:
    """None when the outcome is acceptable for the step, else what was wrong."""
    lines = outcome.stdout.splitlines()
    if outcome.status == "transport":
        return f"no answer from the bridge: {outcome.error_type}"
    if outcome.status == "crashed" and outcome.killed_meanwhile:
        return None  # a container was killed from outside while this ran: a clear, right answer
    if (
        outcome.status == "unavailable"
        and outcome.killed_meanwhile
        and "exited before connecting" in outcome.error
    ):
        # Killed from outside while starting, twice (the bridge replaces a failed start once).
        return None
    if step.kind == "cancel":
        if outcome.status == "cancelled":
            return None
        return f"a cancelled call answered {outcome.status}"
    if step.kind == "hang":
        if outcome.status == "timeout":
            return None
        if outcome.status == "ok" and lines[:1] and lines[0].startswith("tool-error "):
            return None if _tool_line_ok(step, lines[0]) and lines[-1] == step.expected else "hang"
        return f"a hung tool call answered {outcome.status} {outcome.error_type} {lines!r}"
    if outcome.status != "ok":
        return f"status {outcome.status} ({outcome.error_type}: {outcome.error}), stdout {lines!r}"
    if not lines or lines[-1] != step.expected:
        return f"expected {step.expected!r} last, got {lines!r}"
    if step.kind == "tool" and not (len(lines) == 2 and _tool_line_ok(step, lines[0])):
        return f"tool call answered {lines[:-1]!r}"
    crash_reported = lines[0].startswith("tool-error ") and _tool_line_ok(step, lines[0])
    if step.kind == "crash" and not (len(lines) == 2 and crash_reported):
        return f"a crashing upstream answered {lines[:-1]!r}"
    return None


def describe(result: Any) -> Outcome:
    """The outcome a run_python ``CallToolResult`` reports: the status and error from its
    ``structuredContent``, what the code printed from its first (the code's) text block."""
    data = result.structured_content or {}
    error = data.get("error") or {}
    texts = [block.text for block in result.content if getattr(block, "type", "") == "text"]
    if data.get("status") != "ok" or data.get("notices"):
        texts = texts[:-1]  # the last block is the bridge's own
    printed = texts[0] if texts else ""
    for marker in ("\n[stderr]\n", "\n[result] ", "\n[traceback]\n"):
        printed = printed.partition(marker)[0]
    if printed.startswith(("[stderr]\n", "[traceback]\n")):
        printed = ""
    return Outcome(
        status=str(data.get("status", "")),
        stdout=printed,
        error_type=str(error.get("type", "")),
        error=str(error.get("message", ""))[:300],
        sandbox_start=float(data.get("sandbox_start", 0.0)),
    )
