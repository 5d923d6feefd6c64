"""Persistent named sessions over hardened sandboxes: the host-side owner of every container.

:class:`SessionManager` is the entry point; results and streaming events are defined in
:mod:`bridge_core.sessions.types`. User-facing behaviour: ``docs/sessions.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bridge_core._lazy import lazy_exports
from bridge_core._visible import visible, visible_head
from bridge_core.errors import SessionLimitExceeded
from bridge_core.sessions._names import DEFAULT_SESSION, SESSION_NAME_PATTERN, validate_session_name
from bridge_core.sessions._progress import MAX_PROGRESS_MESSAGE
from bridge_core.sessions._store import SessionStore, StoreSettings

if TYPE_CHECKING:  # imported on first use: see _LAZY
    from bridge_core.sessions.manager import SessionManager
    from bridge_core.sessions.types import (
        ExecutionListener,
        ExecutionResult,
        Image,
        SessionConfig,
        SessionStats,
        Status,
    )

__all__ = [
    "DEFAULT_SESSION",
    "MAX_PROGRESS_MESSAGE",
    "SESSION_NAME_PATTERN",
    "ExecutionListener",
    "ExecutionResult",
    "Image",
    "SessionConfig",
    "SessionLimitExceeded",
    "SessionManager",
    "SessionStats",
    "SessionStore",
    "Status",
    "StoreSettings",
    "validate_session_name",
    "visible",
    "visible_head",
]

_LAZY = {
    "ExecutionListener": "bridge_core.sessions.types",
    "ExecutionResult": "bridge_core.sessions.types",
    "Image": "bridge_core.sessions.types",
    "SessionConfig": "bridge_core.sessions.types",
    "SessionStats": "bridge_core.sessions.types",
    "Status": "bridge_core.sessions.types",
    "SessionManager": "bridge_core.sessions.manager",
}
"""Names whose modules are imported on first use: the manager and the types pull in the runtime
backends and the protocol, which the server must not import before it answers ``initialize``."""


__getattr__, __dir__ = lazy_exports(globals(), _LAZY, __all__)
