"""Persistent named sessions over hardened sandboxes: the host-side owner of every container.

:class:`SessionManager` is the entry point; results and streaming events are defined in
:mod:`bridge_core.sessions.types`. User-facing behaviour: ``docs/sessions.md``.
"""

from bridge_core.errors import SessionLimitExceeded
from bridge_core.sessions._names import DEFAULT_SESSION, SESSION_NAME_PATTERN, validate_session_name
from bridge_core.sessions._progress import MAX_PROGRESS_MESSAGE
from bridge_core.sessions._store import SessionStore, StoreSettings
from bridge_core.sessions._visible import visible, visible_head
from bridge_core.sessions.manager import SessionManager, SessionStats
from bridge_core.sessions.types import (
    ExecutionListener,
    ExecutionResult,
    Image,
    SessionConfig,
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
