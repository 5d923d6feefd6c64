"""Static bearer tokens for ``serve --http``: the token file and the SDK token verifier over it.

The file holds one ``NAME sha256:HEX`` line per token (``#`` comments and blank lines allowed):
the name is the principal the token stands for, the hex is the SHA-256 of the token. Only hashes
are stored, so a copy of the file lets nobody in; tokens are 256-bit random strings made by
:func:`add_token`, which is why a plain hash suffices (there is nothing to brute-force).

The file is refused when other users could change it (or read it): whoever can add a line can
let anybody in. It is re-read when it changes, so tokens can be added and revoked without a
restart; a file that turns bad lets nobody in until it is fixed (fail closed).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import secrets
import stat
import time
from dataclasses import dataclass
from pathlib import Path

import anyio
from mcp.server.auth.provider import AccessToken

__all__ = [
    "TOKEN_NAME_PATTERN",
    "StaticTokenVerifier",
    "TokenFileError",
    "add_token",
    "read_tokens",
]

logger = logging.getLogger(__name__)

TOKEN_NAME_PATTERN = r"[A-Za-z0-9_.@-]{1,64}"
_LINE = re.compile(rf"(?P<name>{TOKEN_NAME_PATTERN})\s+sha256:(?P<digest>[0-9a-f]{{64}})")
_SETTING = "MCP_BRIDGE_HTTP_TOKEN_FILE"
RECHECK_INTERVAL = 1.0
"""Seconds between two looks at the file's metadata (a stat per request would be wasted work)."""
MAX_TOKEN_LENGTH = 4096
"""Longer bearer values are refused without hashing (ours are 43 characters)."""
MAX_FILE_SIZE = 1024 * 1024
"""A token file is a few lines per person; a bigger one is a mistake (or an attack)."""


class TokenFileError(ValueError):
    """The token file is missing, unsafe or malformed; the message names the setting and the fix."""


@dataclass(frozen=True, slots=True)
class _Token:
    name: str
    digest: bytes


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()


def _check_safe(path: Path, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise TokenFileError(f"{_SETTING}={path} is not a regular file")
    if info.st_uid not in (os.geteuid(), 0):
        raise TokenFileError(
            f"{_SETTING}={path} belongs to uid {info.st_uid}, not to the user running the bridge "
            "(or root): whoever owns it can let anybody in; use a file of your own"
        )
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o022:
        raise TokenFileError(
            f"{_SETTING}={path} can be changed by other users (mode {mode:04o}), and so let "
            f"anybody in: run chmod 600 {path}"
        )
    if mode & 0o004:
        raise TokenFileError(
            f"{_SETTING}={path} is readable by every user (mode {mode:04o}): run chmod 600 {path}"
        )


def read_tokens(path: Path) -> tuple[_Token, ...]:
    """Check and parse the token file; raises :class:`TokenFileError` naming what is wrong."""
    try:
        with path.open("rb") as file:
            _check_safe(path, os.fstat(file.fileno()))
            raw = file.read(MAX_FILE_SIZE + 1)
    except FileNotFoundError:
        raise TokenFileError(
            f"{_SETTING}={path} does not exist: create it with `mcp-code-execution-mode token NAME`"
        ) from None
    except OSError as exc:
        raise TokenFileError(f"{_SETTING}={path} cannot be read: {exc.strerror}") from None
    if len(raw) > MAX_FILE_SIZE:
        raise TokenFileError(f"{_SETTING}={path} is larger than {MAX_FILE_SIZE} bytes")
    tokens = []
    for number, line in enumerate(raw.decode("utf-8", "replace").splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.fullmatch(line)
        if match is None:
            # The line itself is not quoted: it might be a token pasted by mistake.
            raise TokenFileError(
                f"{_SETTING}={path} line {number} is not `NAME sha256:HEX` (NAME matching "
                f"{TOKEN_NAME_PATTERN}, HEX the 64 lowercase hex digits of the token's SHA-256); "
                "`mcp-code-execution-mode token NAME` writes valid lines"
            )
        tokens.append(_Token(match["name"], bytes.fromhex(match["digest"])))
    if not tokens:
        raise TokenFileError(
            f"{_SETTING}={path} holds no token: add one with `mcp-code-execution-mode token NAME`"
        )
    return tuple(tokens)


def add_token(path: Path, name: str) -> str:
    """Make a new token for ``name``, append its hash to the file (created 0600); return it."""
    if re.fullmatch(TOKEN_NAME_PATTERN, name) is None:
        raise TokenFileError(f"token name {name!r} must match {TOKEN_NAME_PATTERN}")
    token = secrets.token_urlsafe(32)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        raise TokenFileError(f"{_SETTING}={path} cannot be written: {exc.strerror}") from None
    with os.fdopen(fd, "a", encoding="utf-8") as file:
        _check_safe(path, os.fstat(fd))
        file.write(f"{name} sha256:{_digest(token).hex()}\n")
    return token


class StaticTokenVerifier:
    """The SDK's ``TokenVerifier`` over the token file: a token's principal is its line's name."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._tokens = read_tokens(path)
        self._signature = self._stat_signature()
        self._checked_at = time.monotonic()
        self._lock = anyio.Lock()

    def _stat_signature(self) -> tuple[int, int, int, int] | None:
        try:
            info = os.stat(self.path)
        except OSError:
            return None
        return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_mode)

    def _reread(self) -> None:
        signature = self._stat_signature()
        if signature == self._signature:
            return
        self._signature = signature
        try:
            self._tokens = read_tokens(self.path)
        except TokenFileError as exc:
            self._tokens = ()
            logger.error("no bearer token is accepted until the token file is fixed: %s", exc)
            return
        logger.info("token file reloaded: %d token(s)", len(self._tokens))

    async def _refresh(self) -> None:
        async with self._lock:
            now = time.monotonic()
            if now - self._checked_at < RECHECK_INTERVAL:
                return
            self._checked_at = now
            await anyio.to_thread.run_sync(self._reread)

    async def verify_token(self, token: str) -> AccessToken | None:
        """The principal of ``token``, or None; compares against every entry in constant time."""
        await self._refresh()
        if len(token) > MAX_TOKEN_LENGTH:
            return None
        digest = _digest(token)
        found: _Token | None = None
        for entry in self._tokens:  # no early exit: the time taken does not depend on the match
            if hmac.compare_digest(entry.digest, digest):
                found = entry
        if found is None:
            return None
        return AccessToken(token=token, client_id=found.name, subject=found.name, scopes=[])
