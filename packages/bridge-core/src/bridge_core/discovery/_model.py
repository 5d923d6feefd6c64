"""What discovery reports: servers found, problems, name conflicts, and every place looked at."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from bridge_core.servers import ServerSpec

__all__ = [
    "CheckedSource",
    "Conflict",
    "DiscoveryProblem",
    "DiscoveryReport",
    "RawEntry",
    "Severity",
    "Source",
    "Where",
    "SourceUnreadable",
]

Severity = Literal["error", "warning", "info"]
"""``error``: the file or entry was skipped. ``warning``: the entry is used, but something in it
was ignored or replaced (unknown field, unset variable). ``info``: skipped on purpose (disabled,
the bridge's own entry)."""


@dataclass(frozen=True, slots=True)
class DiscoveryProblem:
    """Something wrong (or worth saying) about one file or one entry of it."""

    source: str
    """The file, as shown to users (``~`` for the home directory)."""
    entry: str | None
    """The server entry's name, or None when the whole file is concerned."""
    message: str
    severity: Severity = "error"

    def __str__(self) -> str:
        where = self.source if self.entry is None else f"{self.source}: server {self.entry!r}"
        return f"{self.severity}: {where}: {self.message}"


@dataclass(frozen=True, slots=True)
class Conflict:
    """Several sources define the same server name; the first in precedence order won."""

    name: str
    winner: str
    """``ServerSpec.source`` of the definition in use."""
    losers: tuple[str, ...]
    """``source`` strings of the definitions that were ignored, in precedence order."""


@dataclass(frozen=True, slots=True)
class CheckedSource:
    """One place discovery looked at, found or not (``doctor`` prints the list)."""

    client: str
    path: Path
    found: bool
    servers: int = 0
    """Entries read from it (before skipping disabled/invalid ones)."""
    problem: str | None = None
    """Why the file, although present, could not be used (bad JSON/TOML, wrong shape)."""
    app: str | None = None
    """The client application that loads this file itself (:attr:`Source.app`)."""
    scope: Literal["user", "project"] = "user"
    usable: tuple[str, ...] = ()
    """Names of the enabled, valid entries other than the bridge's own."""
    bridge_entries: tuple[str, ...] = ()
    """Names of the enabled entries that launch this bridge."""


@dataclass(slots=True)
class DiscoveryReport:
    """The result of :func:`bridge_core.discovery.discover`; never raised, always returned."""

    servers: dict[str, ServerSpec] = field(default_factory=dict)
    problems: list[DiscoveryProblem] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    sources_checked: list[CheckedSource] = field(default_factory=list)

    @property
    def errors(self) -> list[DiscoveryProblem]:
        """Problems that made discovery skip a file or an entry."""
        return [p for p in self.problems if p.severity == "error"]


@dataclass(frozen=True, slots=True)
class RawEntry:
    """One server entry as found in a file, before validation (its value is untrusted JSON/TOML)."""

    name: str
    value: object
    location: str
    """Key path inside the file, e.g. ``mcpServers.github`` (appended to the source string)."""
    known_fields: frozenset[str] = frozenset()
    """Client-specific fields accepted without a warning (and otherwise ignored)."""


class SourceUnreadable(Exception):
    """A configuration file exists but cannot be used (bad JSON/TOML, wrong shape)."""


Reader = Callable[[Path], list[RawEntry]]


@dataclass(frozen=True, slots=True)
class Source:
    """One place where a client keeps MCP server definitions, and how to read it."""

    client: str
    path: Path
    read: Reader
    """Returns the entries of the file; raises :class:`SourceUnreadable` or ``OSError``."""
    section: str = ""
    """Distinguishes two readings of the same file (``~/.claude.json``: user and project)."""
    app: str | None = None
    """Key of the client application that loads this file itself (``claude-code``, ``cursor``,
    ...); None for files only the bridge reads (the explicit file, the servers directories)."""
    scope: Literal["user", "project"] = "user"
    """``project``: a file of the current project, which the client loads only there."""


@dataclass(frozen=True, slots=True)
class Where:
    """The machine discovery looks at (parameters, so tests can point it at a fake home)."""

    home: Path
    cwd: Path
    environ: Mapping[str, str]
    platform: str
