"""Coverage-guided fuzzing of the host's frame handling (Channel + LiveSandbox) with atheris.

    hatch run fuzz:host               # libFuzzer flags may follow, e.g. -runs=200000

Each input is a recipe read by ``_driver.frames_from`` (hostile but well-formed messages, raw
CBOR maps, mutated frames, lying length prefixes, garbage) and played into a served sandbox
next to a healthy sibling. Any exception out of ``drive`` (the bridge would have crashed), a
sibling that stops answering, or a hang (``DRIVE_TIMEOUT``) stops the run with the input saved.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import atheris
from anyio.from_thread import BlockingPortal, start_blocking_portal

sys.path.insert(0, str(Path(__file__).parent))

with atheris.instrument_imports():
    # Instrumented so their paths count for coverage; the driver imports what it uses.
    import bridge_core.channel
    import bridge_core.sessions._output
    import bridge_core.sessions._sandbox  # noqa: F401
    import bridge_protocol  # noqa: F401
    from _driver import drive, frames_from  # type: ignore[import-not-found]  # pytest (importlib mode) resolves it

FRAMES = 0
INPUTS = 0
REPORT_EVERY = 10_000
PORTAL: BlockingPortal | None = None
"""One event loop for the whole run: a fresh ``anyio.run`` per input costs more than the input."""


def one_input(data: bytes) -> None:
    global FRAMES, INPUTS
    frames = frames_from(data)
    FRAMES += len(frames)
    INPUTS += 1
    if INPUTS % REPORT_EVERY == 0:  # libFuzzer ends the process with exit(): no report at the end
        print(f"inputs: {INPUTS}, frames fed: {FRAMES}", file=sys.stderr, flush=True)
    assert PORTAL is not None
    observed = PORTAL.call(drive, frames)
    if not observed.sibling_answered:
        raise AssertionError("a sibling sandbox stopped answering")


def main() -> None:
    logging.disable(logging.CRITICAL)  # every protocol violation logs a warning
    global PORTAL
    atheris.Setup(sys.argv, one_input)
    with start_blocking_portal() as PORTAL:
        atheris.Fuzz()


if __name__ == "__main__":
    main()
