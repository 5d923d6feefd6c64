"""The workflows kept on disk: one private directory per principal, one JSON file per workflow.

Layout under the bridge's state dir (``state_dir / "workflows"``, 0700)::

    <owner digest>/.lock                 flock held while a save or delete changes the directory
    <owner digest>/<name digest>.json    {"name", "next", "versions": [{...}, ...]}, 0600
    .anonymous-<id>/...                  one bridge's unauthenticated HTTP clients, the same way

Every directory and file name is a SHA-256 digest (``_limits.owner_dir_name``, and of the
validated workflow name): no text from the sandbox becomes a path, and names differing only in
case stay apart on case-insensitive file systems. Files are replaced atomically
(:func:`~bridge_core.private_files.write_private`), so a reader never sees half a file, and
the lock orders the saves of bridges sharing a state dir (several stdio clients of one user).

Unauthenticated HTTP clients (``mcp-session:…``) keep their workflows only as long as their
MCP session, like their sandboxes: in a directory of this bridge's that is removed when the
client goes (:meth:`WorkflowStore.forget`) and when the bridge stops, and swept at the next
start if the bridge died (its flock is gone then).

Every method blocks (file I/O): async callers run them in a worker thread.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bridge_protocol import ErrorCode

from bridge_core.private_files import PRIVATE_FILE_MODE, private_dir, write_private
from bridge_core.workflows._limits import (
    MAX_DESCRIPTION_CHARS,
    WorkflowLimits,
    is_anonymous,
    owner_dir_name,
    validate_name,
)
from bridge_core.workflows._source import FunctionFacts, WorkflowError, read_function

__all__ = ["Saved", "WorkflowStore", "WorkflowVersion"]

logger = logging.getLogger(__name__)

_ANONYMOUS_PREFIX = ".anonymous-"
_HELD = ".held"


@dataclass(frozen=True, slots=True)
class WorkflowVersion:
    """One saved version of a workflow."""

    name: str
    version: int
    source: str
    description: str
    facts: FunctionFacts
    saved_at: str
    session: str

    def summary(self, versions: list[int]) -> dict[str, Any]:
        """What ``list_workflows`` shows of it (no source)."""
        return {
            "name": self.name,
            "version": self.version,
            "versions": versions,
            "description": self.description,
            "signature": f"{self.facts.function}{self.facts.signature}",
            "docstring": self.facts.docstring,
            "is_async": self.facts.is_async,
            "tools": list(self.facts.tools),
            "workflows": list(self.facts.workflows),
            "saved_at": self.saved_at,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "source": self.source,
            "description": self.description,
            "saved_at": self.saved_at,
            "session": self.session,
        }


@dataclass(frozen=True, slots=True)
class Saved:
    """The outcome of a save: the version made (``created=False``: an import found the same
    source already saved as a version, and made none)."""

    name: str
    version: int
    created: bool = True


def _name_file(name: str) -> str:
    return hashlib.sha256(f"workflow\0{name}".encode()).hexdigest()[:32] + ".json"


def _facts_json(facts: FunctionFacts) -> dict[str, Any]:
    return {
        "function": facts.function,
        "is_async": facts.is_async,
        "signature": facts.signature,
        "docstring": facts.docstring,
        "tools": list(facts.tools),
        "workflows": list(facts.workflows),
    }


def _facts(stored: object, source: str) -> FunctionFacts:
    """A version's facts as its save read them (kept beside its source), so listing and
    searching never parse sources again: 4 MiB of slow-to-parse source took 25 s of the host's
    CPU per ``list_workflows``. A file without them (or with a malformed entry) is parsed."""
    if isinstance(stored, dict):
        text = ("function", "signature", "docstring")
        names = ("tools", "workflows")
        if (
            all(isinstance(stored.get(key), str) for key in text)
            and isinstance(stored.get("is_async"), bool)
            and all(
                isinstance(stored.get(key), list)
                and all(isinstance(item, str) for item in stored[key])
                for key in names
            )
        ):
            return FunctionFacts(
                function=stored["function"],
                is_async=stored["is_async"],
                signature=stored["signature"],
                docstring=stored["docstring"],
                tools=tuple(stored["tools"]),
                workflows=tuple(stored["workflows"]),
            )
    return read_function(source)


def check_description(untrusted: object) -> str:
    if untrusted is None:
        return ""
    if not isinstance(untrusted, str):
        raise WorkflowError(f"a description must be a str, not {type(untrusted).__name__}")
    if len(untrusted) > MAX_DESCRIPTION_CHARS:
        raise WorkflowError(
            f"the description has {len(untrusted)} characters; at most {MAX_DESCRIPTION_CHARS}"
        )
    return untrusted


class WorkflowStore:
    """Saves, lists, loads and deletes the workflows of each principal under ``root``."""

    def __init__(self, root: Path, limits: WorkflowLimits | None = None) -> None:
        self.root = root
        self.limits = limits or WorkflowLimits()
        self._anonymous: Path | None = None
        self._held_fd: int | None = None

    # --- lifecycle -------------------------------------------------------------------------

    def open(self) -> None:
        """Create the root (private) and sweep what dead bridges left of anonymous clients."""
        private_dir(self.root)
        for entry in self.root.iterdir():
            if entry.name.startswith(_ANONYMOUS_PREFIX) and entry.is_dir():
                self._sweep_anonymous(entry)

    def close(self) -> None:
        """Remove this bridge's anonymous clients' workflows."""
        if self._anonymous is not None:
            shutil.rmtree(self._anonymous, ignore_errors=True)
            self._anonymous = None
        if self._held_fd is not None:
            os.close(self._held_fd)
            self._held_fd = None

    @staticmethod
    def _sweep_anonymous(entry: Path) -> None:
        try:
            fd = os.open(entry / _HELD, os.O_RDONLY)
        except OSError:
            shutil.rmtree(entry, ignore_errors=True)  # never held: a bridge died creating it
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return  # its bridge runs
        finally:
            os.close(fd)
        shutil.rmtree(entry, ignore_errors=True)

    def _anonymous_root(self) -> Path:
        if self._anonymous is None:
            path = private_dir(self.root / f"{_ANONYMOUS_PREFIX}{uuid.uuid4().hex}")
            fd = os.open(path / _HELD, os.O_RDONLY | os.O_CREAT, PRIVATE_FILE_MODE)
            fcntl.flock(fd, fcntl.LOCK_EX)  # released when this process ends, however it ends
            self._held_fd, self._anonymous = fd, path
        return self._anonymous

    def forget(self, client: str | None) -> None:
        """An anonymous client is gone: its workflows go with it."""
        if is_anonymous(client) and self._anonymous is not None:
            shutil.rmtree(self._anonymous / owner_dir_name(client), ignore_errors=True)

    # --- paths and locking -----------------------------------------------------------------

    def _owner(self, client: str | None, *, create: bool) -> Path | None:
        base = self._anonymous_root() if is_anonymous(client) else self.root
        path = base / owner_dir_name(client)
        if create:
            return private_dir(path)
        return path if path.is_dir() else None

    @contextlib.contextmanager
    def _locked(self, owner: Path) -> Iterator[None]:
        fd = os.open(owner / ".lock", os.O_RDWR | os.O_CREAT, PRIVATE_FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    # --- reading ---------------------------------------------------------------------------

    def _read(self, path: Path) -> dict[str, Any] | None:
        try:
            if path.stat().st_size > self.limits.max_total_bytes:
                raise ValueError("larger than a principal's total")
            data = json.loads(path.read_bytes())
            if not isinstance(data, dict) or not isinstance(data.get("versions"), list):
                raise ValueError("not a workflow file")
            validate_name(data.get("name"))
            return data
        except FileNotFoundError:
            return None
        except (OSError, ValueError, WorkflowError) as exc:
            logger.warning("workflow file %s skipped: %s", path, exc)
            return None

    def _versions(self, data: dict[str, Any]) -> list[WorkflowVersion]:
        found = []
        for entry in data["versions"]:
            try:
                source = entry["source"]
                found.append(
                    WorkflowVersion(
                        name=data["name"],
                        version=int(entry["version"]),
                        source=source,
                        description=str(entry.get("description", "")),
                        facts=_facts(entry.get("facts"), source),
                        saved_at=str(entry.get("saved_at", "")),
                        session=str(entry.get("session", "")),
                    )
                )
            except (KeyError, TypeError, ValueError, WorkflowError) as exc:
                logger.warning("a version of workflow %s skipped: %s", data["name"], exc)
        return found

    def _files(self, client: str | None) -> list[Path]:
        owner = self._owner(client, create=False)
        return [] if owner is None else sorted(owner.glob("*.json"))

    def latest(self, client: str | None) -> list[WorkflowVersion]:
        """The latest version of each of ``client``'s workflows, by name."""
        latest = []
        for path in self._files(client):
            data = self._read(path)
            if data is not None and (versions := self._versions(data)):
                latest.append(versions[-1])
        return sorted(latest, key=lambda v: v.name)

    def list_with_versions(self, client: str | None) -> list[tuple[WorkflowVersion, list[int]]]:
        """Like :meth:`list`, each with the numbers of all its versions."""
        found = []
        for path in self._files(client):
            data = self._read(path)
            if data is not None and (versions := self._versions(data)):
                found.append((versions[-1], [v.version for v in versions]))
        return sorted(found, key=lambda item: item[0].name)

    def all_versions(self, client: str | None) -> list[WorkflowVersion]:
        """Every version of every workflow of ``client`` (for export)."""
        found = []
        for path in self._files(client):
            data = self._read(path)
            if data is not None:
                found.extend(self._versions(data))
        return sorted(found, key=lambda v: (v.name, v.version))

    def get(self, client: str | None, name: str, version: int | None = None) -> WorkflowVersion:
        """One version (the latest by default); :class:`WorkflowError` if there is none."""
        name = validate_name(name)
        owner = self._owner(client, create=False)
        data = None if owner is None else self._read(owner / _name_file(name))
        versions = [] if data is None else self._versions(data)
        if not versions:
            raise WorkflowError(f"no workflow named {name!r}", ErrorCode.UNKNOWN_TOOL)
        if version is None:
            return versions[-1]
        for entry in versions:
            if entry.version == version:
                return entry
        kept = ", ".join(str(v.version) for v in versions)
        raise WorkflowError(
            f"workflow {name!r} has no version {version} (its versions: {kept})",
            ErrorCode.UNKNOWN_TOOL,
        )

    # --- changing --------------------------------------------------------------------------

    def save(
        self,
        client: str | None,
        name: str,
        source: str,
        description: str | None = None,
        *,
        session: str = "",
        skip_same: bool = False,
    ) -> Saved:
        """Save ``source`` as the next version of ``name``; every bound is checked first.

        ``skip_same``: when a version already has this source, make none (imports).
        """
        name = validate_name(name)
        description = check_description(description)
        if not isinstance(source, str):
            raise WorkflowError(f"a workflow's source must be a str, not {type(source).__name__}")
        size = len(source.encode("utf-8", "surrogatepass"))
        if size > self.limits.max_source_bytes:
            raise WorkflowError(
                f"the source of {name!r} is {size} bytes; a workflow's source is at most "
                f"{self.limits.max_source_bytes} bytes",
                ErrorCode.INVALID_ARGUMENTS,
            )
        facts = read_function(source)  # refuses anything but one function
        owner = self._owner(client, create=True)
        assert owner is not None
        path = owner / _name_file(name)
        with self._locked(owner):
            data = self._read(path)
            if data is None:
                names = len(list(owner.glob("*.json")))
                if names >= self.limits.max_names:
                    raise WorkflowError(
                        f"{names} workflows are saved, the most one principal may keep: delete "
                        "one (runtime.delete_workflow) before saving a new name",
                        ErrorCode.INVALID_ARGUMENTS,
                    )
                data = {"name": name, "next": 1, "versions": []}
            versions = data["versions"]
            same = [v for v in versions if v.get("source") == source] if skip_same else []
            if same:
                return Saved(name, int(same[-1]["version"]), created=False)
            if len(versions) >= self.limits.max_versions:
                raise WorkflowError(
                    f"workflow {name!r} has {len(versions)} versions, the most one workflow "
                    "keeps: delete old ones (runtime.delete_workflow(name, version=N)) or save "
                    "under another name",
                    ErrorCode.INVALID_ARGUMENTS,
                )
            version = max(
                int(data.get("next", 1)), 1 + max((int(v["version"]) for v in versions), default=0)
            )
            saved_at = datetime.now(UTC).isoformat(timespec="seconds")
            entry = {
                "version": version,
                "source": source,
                "description": description,
                "saved_at": saved_at,
                "session": session[:128],
                "facts": _facts_json(facts),
            }
            data = {"name": name, "next": version + 1, "versions": [*versions, entry]}
            encoded = json.dumps(data, ensure_ascii=False).encode("utf-8", "surrogatepass")
            old = path.stat().st_size if path.exists() else 0
            total = sum(p.stat().st_size for p in owner.glob("*.json")) - old + len(encoded)
            if total > self.limits.max_total_bytes:
                raise WorkflowError(
                    f"saving would make this principal's workflows {total} bytes; they may "
                    f"take at most {self.limits.max_total_bytes} bytes: delete some first",
                    ErrorCode.INVALID_ARGUMENTS,
                )
            write_private(path, encoded)
        return Saved(name, version)

    def delete(self, client: str | None, name: str, version: int | None = None) -> list[int]:
        """Delete ``name`` (every version), or only its ``version``; the numbers deleted."""
        name = validate_name(name)
        owner = self._owner(client, create=False)
        if owner is None:
            raise WorkflowError(f"no workflow named {name!r}", ErrorCode.UNKNOWN_TOOL)
        path = owner / _name_file(name)
        with self._locked(owner):
            data = self._read(path)
            if data is None:
                raise WorkflowError(f"no workflow named {name!r}", ErrorCode.UNKNOWN_TOOL)
            numbers = [int(v["version"]) for v in data["versions"]]
            if version is None or numbers == [version]:
                path.unlink(missing_ok=True)
                return numbers
            if version not in numbers:
                kept = ", ".join(map(str, numbers))
                raise WorkflowError(
                    f"workflow {name!r} has no version {version} (its versions: {kept})",
                    ErrorCode.UNKNOWN_TOOL,
                )
            data["versions"] = [v for v in data["versions"] if int(v["version"]) != version]
            write_private(
                path, json.dumps(data, ensure_ascii=False).encode("utf-8", "surrogatepass")
            )
            return [version]
