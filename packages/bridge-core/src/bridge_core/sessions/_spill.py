"""Copy an execution's full (spilled) output into the sandbox's /tmp.

The host keeps the full text in a temp file while the execution streams (see ``_output``); once it
ended, the file is sent to the sandbox in chunks, each one a tiny ``Execute`` that appends a
base64 chunk to the target file. The copy code runs under ``exec`` with its own globals so it adds
nothing to the user's namespace. Bridge memory stays at one chunk, whatever the output size.
"""

from __future__ import annotations

import base64
import uuid

import anyio

from bridge_core.sessions._output import OutputCollector
from bridge_core.sessions._sandbox import Execution, LiveSandbox

__all__ = ["OUTPUT_DIR", "save_full_output"]

OUTPUT_DIR = "/tmp/mcp-output"
"""Where full outputs land inside the sandbox (/tmp is its only writable place)."""

CHUNK_BYTES = 768 * 1024
"""Raw bytes per copy step: 1 MiB of base64, far below the 16 MiB frame limit."""

STEP_TIMEOUT = 30.0

_APPEND = "exec({source!r}, {{'path': {path!r}, 'mode': {mode!r}, 'data': {data!r}}})"
_SOURCE = (
    "import base64, os\n"
    "os.makedirs(os.path.dirname(path), exist_ok=True)\n"
    "with open(path, mode) as f:\n"
    "    f.write(base64.b64decode(data))\n"
)


async def save_full_output(live: LiveSandbox, output: OutputCollector, path: str) -> str | None:
    """Write the spilled output to ``path`` inside ``live``; return None or what went wrong."""
    offset = 0
    while offset < output.spilled_bytes or offset == 0:
        try:
            data = await output.read_spill(offset, CHUNK_BYTES)
        except OSError as exc:
            return f"the bridge could not read its copy ({exc.strerror or exc})"
        code = _APPEND.format(
            source=_SOURCE,
            path=path,
            mode="wb" if offset == 0 else "ab",
            data=base64.b64encode(data).decode("ascii"),
        )
        step = Execution(
            uuid.uuid4().hex, OutputCollector(1024, output.spill_dir, spill_limit=0), None
        )
        try:
            await live.start(step, code)
            with anyio.move_on_after(STEP_TIMEOUT):
                await step.done.wait()
        finally:
            live.finish(step)
            await step.output.aclose()
        if step.result is None:
            return "the sandbox did not take it"
        if step.result.status != "ok":
            error = step.result.error
            detail = f"{error.type}: {error.message}" if error else step.result.status
            return f"writing it in the sandbox failed ({detail})"
        if not data:
            break
        offset += len(data)
    return None
