"""The names a workflow may have, who owns it on disk, and how much a principal may keep."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

from bridge_core.workflows._source import WorkflowError

__all__ = [
    "MAX_DESCRIPTION_CHARS",
    "MAX_NAME_CHARS",
    "WorkflowLimits",
    "audit_principal",
    "is_anonymous",
    "owner_dir_name",
    "validate_name",
    "validate_version",
]

MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1000
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_ANONYMOUS = "mcp-session:"


@dataclass(frozen=True, slots=True)
class WorkflowLimits:
    """What one principal may keep (every bound is named in the error that reaches it)."""

    max_names: int = 100
    max_versions: int = 20
    max_source_bytes: int = 64 * 1024
    max_total_bytes: int = 4 * 1024 * 1024
    """All versions of all of a principal's workflows, sources and descriptions."""


def validate_name(untrusted: object) -> str:
    """A workflow name: an ASCII identifier of at most :data:`MAX_NAME_CHARS` characters."""
    if not isinstance(untrusted, str):
        raise WorkflowError(f"a workflow name must be a str, not {type(untrusted).__name__}")
    if not _NAME.fullmatch(untrusted):
        shown = untrusted[:80] + ("…" if len(untrusted) > 80 else "")
        raise WorkflowError(
            f"{shown!r} is not a valid workflow name: use letters, digits and _ (not starting "
            f"with a digit), at most {MAX_NAME_CHARS} characters"
        )
    return untrusted


def validate_version(untrusted: object) -> int | None:
    """``None`` (the latest) or a positive version number."""
    if untrusted is None:
        return None
    if isinstance(untrusted, bool) or not isinstance(untrusted, int) or untrusted < 1:
        raise WorkflowError(f"a workflow version must be a positive int, not {untrusted!r:.80}")
    return untrusted


def is_anonymous(client: str | None) -> bool:
    """Whether ``client`` is an unauthenticated HTTP client (its workflows end with it)."""
    return client is not None and client.startswith(_ANONYMOUS)


def owner_dir_name(client: str | None) -> str:
    """The directory of ``client``'s workflows: a digest, never a name from outside."""
    owner = "" if client is None else f"client:{client}"
    return hashlib.sha256(f"workflows\0{owner}".encode()).hexdigest()[:32]


def audit_principal(client: str | None) -> str:
    """Who ``client`` is, as the audit log says it: ``stdio``, the token's name, or
    ``anonymous`` (an anonymous client's key is derived from its session id, a credential)."""
    if client is None:
        return "stdio"
    if client.startswith("principal:"):
        try:
            parts = json.loads(client.removeprefix("principal:"))
        except ValueError:
            parts = None
        if isinstance(parts, list) and parts and isinstance(parts[0], str):
            return f"token:{parts[0][:64]}"
        return "token"
    return "anonymous"
