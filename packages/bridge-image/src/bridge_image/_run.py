"""Running host tools (podman, pip, mmdebstrap): output streamed as progress, failures raised."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bridge_image.errors import BuildFailed, MissingTool

__all__ = ["Progress", "append_labels", "image_inspect", "require_tool", "run_streamed"]

Progress = Callable[[str], None]
"""Receives one line of build output at a time (the CLI prints them to stderr)."""

_TAIL_LINES = 20


def require_tool(name: str, hint: str) -> str:
    """Return the path of executable ``name`` or raise :class:`MissingTool` with ``hint``."""
    path = shutil.which(name)
    if path is None:
        raise MissingTool(f"{name} is not installed: {hint}")
    return path


def run_streamed(
    argv: Sequence[str],
    *,
    progress: Progress | None,
    what: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float | None = None,
) -> list[str]:
    """Run ``argv``, passing each output line to ``progress``; return the lines.

    stderr is merged into stdout so the progress shows both in order. A non-zero exit raises
    :class:`BuildFailed` naming ``what`` and quoting the last lines of output; so does a run
    past ``timeout`` seconds (the process is killed: a registry that stops answering must not
    hold the caller forever).
    """
    lines: list[str] = []
    with subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        env=dict(env) if env is not None else None,
        cwd=cwd,
    ) as process:
        assert process.stdout is not None
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            process.kill()

        watchdog = threading.Timer(timeout, expire) if timeout is not None else None
        if watchdog is not None:
            watchdog.daemon = True
            watchdog.start()
        try:
            for raw in process.stdout:
                line = raw.rstrip("\n")
                lines.append(line)
                if progress is not None:
                    progress(line)
            code = process.wait()
        finally:
            if watchdog is not None:
                watchdog.cancel()
    if expired.is_set():
        lines.append(f"(killed after {timeout:g} s)")
    if code != 0:
        tail = "\n".join(lines[-_TAIL_LINES:])
        raise BuildFailed(f"{what} failed (exit {code}): {' '.join(argv[:3])} ...\n{tail}")
    return lines


def append_labels(containerfile: Path, labels: Mapping[str, str]) -> None:
    """Append a ``LABEL`` instruction with literal ``labels`` to a build context's Containerfile.

    Literal values, because buildah's layer cache gets the label wrong both other ways (podman
    4.3): a ``LABEL x="${ARG}"`` step is reused when only the build arg changed (stale value),
    and ``podman build --label`` is stamped on every intermediate image, so a cached
    intermediate from a build with other labels changes the final history (and image ID).
    """
    pairs = " \\\n      ".join(
        f"{json.dumps(k)}={json.dumps(v)}" for k, v in sorted(labels.items())
    )
    with containerfile.open("a") as out:
        out.write(f"\n# Added by bridge-image for this build.\nLABEL {pairs}\n")


def image_inspect(podman: str, ref: str) -> dict[str, Any] | None:
    """``podman image inspect`` of ``ref`` as a dict, or None if there is no such image."""
    done = subprocess.run(
        [podman, "image", "inspect", "--format", "json", ref],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return None
    found = json.loads(done.stdout)
    if not isinstance(found, list) or not found or not isinstance(found[0], dict):
        return None
    return found[0]
