"""The one decision about a server or tool name from the sandbox: found, denied, or unknown.

Every path that names a server or tool on the host's side — a call, a docs request, the lookup
the sandbox makes when user code names something it was not shown — goes through these two
functions, so a name gets the same answer however it was written:

- a server is checked for existence first (a typo gets close names, not a policy lecture), then
  for policy: a denied server is refused with the rule and the setting;
- a tool is checked against policy first, on the name as given, so a refusal needs no I/O and
  says nothing about whether the tool exists; then for existence among the server's tools;
- ``python_forms`` (lookups only, never calls) also accepts the Python spelling of a name
  (``get_user_info`` for ``get-user.info``, ``mcp_my_server`` for ``my-server``), so the form of a
  denied tool is refused as denied rather than reported as unknown;
- suggestions come only from what the policy allows: a denied name is never suggested.

Names longer than :data:`~bridge_protocol.names.MAX_NAME_CHARS` are unknown at once.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from bridge_protocol.names import MAX_NAME_CHARS, python_forms

from bridge_core.catalog._errors import UnknownServer, UnknownTool
from bridge_core.policy import Policy, PolicyDenied

__all__ = ["resolve_server", "resolve_tool"]


def resolve_server(
    policy: Policy, name: str, configured: Iterable[str], *, forms: bool = False
) -> str:
    """The configured server ``name`` means; raises :class:`UnknownServer` (close names among the
    visible servers) or :class:`PolicyDenied` (the rule and the setting)."""
    if len(name) > MAX_NAME_CHARS:
        raise UnknownServer(name, ())
    servers = list(configured)
    matches = [name] if name in servers else []
    if not matches and forms:
        matches = [s for s in servers if name in python_forms(s, server=True)]
    if not matches:
        raise UnknownServer(name, [s for s in servers if policy.check_server(s).allowed])
    for server in matches:
        if policy.check_server(server).allowed:
            return server
    raise PolicyDenied(policy.check_server(matches[0]))


def resolve_tool(
    policy: Policy, server: str, name: str, tools: Collection[str], *, forms: bool = False
) -> str:
    """The tool of ``server`` (whose tools, allowed or not, are ``tools``) that ``name`` means;
    raises :class:`PolicyDenied` or :class:`UnknownTool` (close names among the allowed tools)."""
    if len(name) > MAX_NAME_CHARS:
        raise UnknownTool(server, name, ())
    policy.enforce(server, name)
    if name in tools:
        return name
    matches = [t for t in tools if name in python_forms(t, server=False)] if forms else []
    for tool in matches:
        if policy.check(server, tool).allowed:
            return tool
    if matches:
        raise PolicyDenied(policy.check(server, matches[0]))
    raise UnknownTool(server, name, _allowed(policy, server, tools))


def _allowed(policy: Policy, server: str, tools: Iterable[str]) -> list[str]:
    return [t for t in tools if policy.check(server, t).allowed]
