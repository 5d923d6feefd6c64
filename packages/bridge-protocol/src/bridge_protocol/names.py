"""How MCP server and tool names are written in sandbox Python, shared by both sides.

Sandbox code may name a tool ``get-user.info`` as ``mcp_github.get_user_info`` and a server
``my-server`` as ``mcp_my_server``. The sandbox resolves these forms for the names it was shown;
the host resolves them too, so that a form naming a denied tool is refused as denied (with the
rule) instead of reported as unknown. Both must apply the very same rule: it lives here.
"""

from __future__ import annotations

import keyword
import re

__all__ = ["ALIAS_PREFIX", "MAX_NAME_CHARS", "alias_for", "identifier_for", "python_forms"]

ALIAS_PREFIX = "mcp_"
"""``mcp_<server>`` is the module alias of a server (``from mcp import mcp_github``)."""

MAX_NAME_CHARS = 256
"""No server or tool name the host answers for is longer (MCP asks tool names to stay within
128 characters). A longer name from the sandbox is unknown at once: it costs no matching."""

# ASCII only: some Unicode "word" characters are not valid in identifiers.
_NOT_IDENTIFIER = re.compile(r"[^0-9A-Za-z_]")


def identifier_for(name: str) -> str:
    """The Python identifier of a tool or server name: ``get-user.info`` → ``get_user_info``,
    ``2fa`` → ``_2fa``, ``class`` → ``class_`` (each character outside ``[0-9A-Za-z_]`` becomes
    ``_``)."""
    ident = _NOT_IDENTIFIER.sub("_", name)
    if not ident or ident[0].isdigit():
        ident = f"_{ident}"
    return f"{ident}_" if keyword.iskeyword(ident) else ident


def alias_for(server: str) -> str:
    """The module alias of a server: ``my-server`` → ``mcp_my_server``."""
    return ALIAS_PREFIX + _NOT_IDENTIFIER.sub("_", server)


def python_forms(name: str, *, server: bool) -> frozenset[str]:
    """Every way sandbox code may write ``name``: the name itself, its identifier and, for a
    server, its alias."""
    forms = {name, identifier_for(name)}
    if server:
        forms.add(alias_for(name))
    return frozenset(forms)
