"""What a server's tool definitions cost in the prompt, and which servers a client pays for twice.

A client sends every tool definition of every server it loads with each request. A server both in
a client's own config and behind the bridge costs its whole schema in that client *and* is
reachable through ``run_python``: the saving the bridge exists for is lost for it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import mcp_types as types
from bridge_core.discovery import CheckedSource

__all__ = ["BYTES_PER_TOKEN", "DoubleLoad", "double_loads", "schema_bytes", "token_estimate"]

BYTES_PER_TOKEN = 4
"""A rough rule for JSON schemas: the repository's token benchmark (bench/token_overhead.py,
Claude tokenizer) measured 39,688 bytes = 9,181 tokens (4.3 bytes/token) over five real servers;
4 slightly overestimates. Shown as an estimate, because doctor has no tokenizer."""


def schema_bytes(tools: Sequence[types.Tool]) -> int:
    """Size of the ``tools/list`` answer as clients forward it to the model (compact JSON)."""
    dumped = [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in tools]
    return len(json.dumps(dumped, separators=(",", ":"), ensure_ascii=False).encode())


def token_estimate(size: int) -> int:
    """Estimated prompt tokens of ``size`` bytes of tool schemas."""
    return -(-size // BYTES_PER_TOKEN)


@dataclass(frozen=True, slots=True)
class DoubleLoad:
    """Server ``name`` is loaded by client ``app`` from ``source`` and proxied by the bridge."""

    name: str
    app: str
    source: CheckedSource


def double_loads(
    checked: Iterable[CheckedSource], proxied: Mapping[str, object]
) -> list[DoubleLoad]:
    """Servers a client loads itself while the same client also runs the bridge that proxies them.

    A client runs the bridge when any of its files (user or project) has an entry launching it;
    it then loads every usable entry of all its files directly.
    """
    checked = list(checked)
    with_bridge = {c.app for c in checked if c.app is not None and c.bridge_entries}
    found = []
    for source in checked:
        if source.app in with_bridge:
            assert source.app is not None
            found += [DoubleLoad(n, source.app, source) for n in source.usable if n in proxied]
    return found
