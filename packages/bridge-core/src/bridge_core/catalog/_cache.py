"""The persisted tool-list cache: answer listings and search without starting unchanged servers.

One JSON file per server configuration, named by :meth:`ServerSpec.cache_key` (a digest of what
changes the server's offer: command, args, env, url ...), so an edited entry misses the cache.
Writes are atomic (temp file + rename) and private (0600 in a 0700 directory: tool lists can
describe private data); a corrupt or foreign file is ignored and logged, never fatal. The
methods do blocking file I/O: async callers use ``anyio.to_thread.run_sync``.

Bounded like the live lists it mirrors (``[servers] max_tools``,
``[servers] max_tool_list_size``): a list past them is never written, and a file past them (an
older bridge's, or a foreign one) is removed on sight without being read, so a huge catalog is
not reloaded on every start.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bridge_core.catalog._docs import ToolDoc
from bridge_core.private_files import private_dir, write_private
from bridge_core.servers import ServerSpec

__all__ = ["CachedTools", "ToolCache"]

logger = logging.getLogger(__name__)

_FORMAT = 1
"""Kept at 1 while changes are additions a reader may lack: a tool's ``_meta``, annotations,
``execution`` and ``icons`` came later and are optional in :meth:`ToolDoc.from_json`, so an older
file loads (its tools without them, until their server next lists) and an older bridge reads a
newer file (ignoring them). A change an older reader would misread takes 2."""
_SLACK_BYTES = 64 * 1024
"""Room in a file for what is not the tool list itself (format, name, time, description)."""


@dataclass(frozen=True, slots=True)
class CachedTools:
    """A server's tool list as last seen."""

    tools: tuple[ToolDoc, ...]
    description: str
    saved_at: float
    """Unix time of the listing."""


class ToolCache:
    """Tool lists under ``state_dir/tools/<cache key>.json``."""

    def __init__(
        self, state_dir: Path, *, max_tools: int = 2000, max_bytes: int = 8 * 1024 * 1024
    ) -> None:
        self.directory = state_dir / "tools"
        self._max_tools = max_tools
        self._max_file = max_bytes + _SLACK_BYTES

    def _path(self, spec: ServerSpec) -> Path:
        return self.directory / f"{spec.cache_key()}.json"

    def load(self, spec: ServerSpec) -> CachedTools | None:
        """The cached list for this exact configuration, or None (missing, corrupt, foreign)."""
        path = self._path(spec)
        try:
            if path.stat().st_size > self._max_file:
                path.unlink(missing_ok=True)
                raise ValueError(f"larger than {self._max_file} bytes: removed, not read")
            data = json.loads(path.read_bytes())
            if not isinstance(data, dict) or data.get("format") != _FORMAT:
                raise ValueError("unknown cache format")
            raw_tools = data["tools"]
            if not isinstance(raw_tools, list):
                raise ValueError("tools is not a list")
            if len(raw_tools) > self._max_tools:
                path.unlink(missing_ok=True)
                raise ValueError(f"more than {self._max_tools} tools: removed")
            tools = tuple(ToolDoc.from_json(spec.name, t) for t in raw_tools)
            description = data.get("description")
            saved_at = data.get("saved_at")
            return CachedTools(
                tools,
                description if isinstance(description, str) else "",
                float(saved_at) if isinstance(saved_at, int | float) else 0.0,
            )
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            logger.warning("ignoring tool cache %s of server %r: %s", path, spec.name, exc)
            return None

    def store(self, spec: ServerSpec, tools: Sequence[ToolDoc], description: str = "") -> None:
        """Save the list atomically; I/O errors are logged, not raised (the cache is optional).
        A list past the bounds is not saved (and an older file for it is removed)."""
        payload = {
            "format": _FORMAT,
            "server": spec.name,
            "saved_at": time.time(),
            "description": description,
            "tools": [t.to_json() for t in tools],
        }
        path = self._path(spec)
        # Compact UTF-8, as the wire's tool lists are measured: non-ASCII is not inflated.
        data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
        if len(tools) > self._max_tools or len(data) > self._max_file:
            logger.warning("not caching the tool list of server %r: past the bounds", spec.name)
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)
            return
        try:
            private_dir(self.directory)
            write_private(path, data)
        except OSError as exc:
            logger.warning("cannot save tool cache %s of server %r: %s", path, spec.name, exc)
