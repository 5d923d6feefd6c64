"""Which upstream servers and tools sandbox code may see and call.

Four settings, each a comma- or space-separated list of ``fnmatch`` patterns (case-sensitive):

- ``[policy] allow_servers`` / ``[policy] deny_servers``: server names (``github``, ``git*``);
- ``[policy] allow_tools`` / ``[policy] deny_tools``: ``server.tool`` (``github.create_*``,
  ``filesystem.*``) or, without a dot, a tool name on any server (``delete_*``).

Deny beats allow. A non-empty allow list denies everything it does not match; the server and the
tool allow lists must both let a call through. Denied servers and tools are hidden from listings
and search, and a call to one is refused with an error that names the rule and the setting.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase

from bridge_protocol import ErrorCode

from bridge_core.errors import BridgeError
from bridge_core.gateway import CallFailed

__all__ = [
    "ALLOW_SERVERS",
    "ALLOW_TOOLS",
    "DENY_SERVERS",
    "DENY_TOOLS",
    "Decision",
    "Policy",
    "PolicyDenied",
]

# The settings as refusals name them: their keys in bridge.toml (the MCP_BRIDGE_* variables of
# the same names are deprecated, read by the server for one more release only).
ALLOW_SERVERS = "[policy] allow_servers"
DENY_SERVERS = "[policy] deny_servers"
ALLOW_TOOLS = "[policy] allow_tools"
DENY_TOOLS = "[policy] deny_tools"
_ENVIRONMENT = {
    "allow_servers": "MCP_BRIDGE_ALLOW_SERVERS",
    "deny_servers": "MCP_BRIDGE_DENY_SERVERS",
    "allow_tools": "MCP_BRIDGE_ALLOW_TOOLS",
    "deny_tools": "MCP_BRIDGE_DENY_TOOLS",
}


@dataclass(frozen=True, slots=True)
class Decision:
    """The verdict for one server or tool, and the rule that gave it."""

    allowed: bool
    rule: str
    """``SETTING=pattern`` that matched (``[policy] deny_tools=github.delete_*``: the setting's
    key in bridge.toml), ``SETTING`` for "not in the allow list", or ``default``."""
    reason: str
    """A sentence for the caller: what was refused or allowed, and by which setting."""


class PolicyDenied(CallFailed, BridgeError):
    """A call or lookup refused by policy (a :class:`CallFailed` with ``POLICY_DENIED``)."""

    def __init__(self, decision: Decision) -> None:
        super().__init__(ErrorCode.POLICY_DENIED, decision.reason, {"rule": decision.rule})
        self.decision = decision


def _patterns(value: str | Iterable[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    items = re.split(r"[,\s]+", value) if isinstance(value, str) else value
    return tuple(p.strip() for p in items if p.strip())


def _tool_matches(pattern: str, server: str, tool: str) -> bool:
    if "." in pattern:
        return fnmatchcase(f"{server}.{tool}", pattern)
    return fnmatchcase(tool, pattern)


@dataclass(frozen=True, slots=True)
class Policy:
    """Allow/deny lists for servers and tools; the default policy allows everything."""

    allow_servers: tuple[str, ...] = ()
    deny_servers: tuple[str, ...] = ()
    allow_tools: tuple[str, ...] = ()
    deny_tools: tuple[str, ...] = ()

    @classmethod
    def from_settings(
        cls,
        *,
        allow_servers: str | Iterable[str] | None = None,
        deny_servers: str | Iterable[str] | None = None,
        allow_tools: str | Iterable[str] | None = None,
        deny_tools: str | Iterable[str] | None = None,
    ) -> Policy:
        """Build from setting values: comma/space-separated strings or lists of patterns."""
        return cls(
            _patterns(allow_servers),
            _patterns(deny_servers),
            _patterns(allow_tools),
            _patterns(deny_tools),
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Policy:
        """Build from the ``MCP_BRIDGE_{ALLOW,DENY}_{SERVERS,TOOLS}`` variables."""
        return cls.from_settings(**{key: environ.get(name) for key, name in _ENVIRONMENT.items()})

    @property
    def is_open(self) -> bool:
        """True when no list is set (everything allowed)."""
        return not (self.allow_servers or self.deny_servers or self.allow_tools or self.deny_tools)

    def check_server(self, server: str) -> Decision:
        """May the server be seen and used at all (by the server lists only)?"""
        for pattern in self.deny_servers:
            if fnmatchcase(server, pattern):
                rule = f"{DENY_SERVERS}={pattern}"
                return Decision(False, rule, f"server {server!r} is denied by {rule}")
        if self.allow_servers:
            for pattern in self.allow_servers:
                if fnmatchcase(server, pattern):
                    rule = f"{ALLOW_SERVERS}={pattern}"
                    return Decision(True, rule, f"server {server!r} is allowed by {rule}")
            return Decision(
                False,
                ALLOW_SERVERS,
                f"server {server!r} is not in {ALLOW_SERVERS} ({','.join(self.allow_servers)})",
            )
        return Decision(True, "default", f"server {server!r} is allowed (no server rule applies)")

    def check(self, server: str, tool: str) -> Decision:
        """May ``server.tool`` be listed and called? Deny beats allow; allow lists are closed."""
        verdict = self.check_server(server)
        if not verdict.allowed:
            return verdict
        for pattern in self.deny_tools:
            if _tool_matches(pattern, server, tool):
                rule = f"{DENY_TOOLS}={pattern}"
                return Decision(False, rule, f"tool {server}.{tool} is denied by {rule}")
        if self.allow_tools:
            for pattern in self.allow_tools:
                if _tool_matches(pattern, server, tool):
                    rule = f"{ALLOW_TOOLS}={pattern}"
                    return Decision(True, rule, f"tool {server}.{tool} is allowed by {rule}")
            return Decision(
                False,
                ALLOW_TOOLS,
                f"tool {server}.{tool} is not in {ALLOW_TOOLS} ({','.join(self.allow_tools)})",
            )
        return verdict

    def enforce(self, server: str, tool: str) -> None:
        """Raise :class:`PolicyDenied` unless ``server.tool`` is allowed."""
        decision = self.check(server, tool)
        if not decision.allowed:
            raise PolicyDenied(decision)
