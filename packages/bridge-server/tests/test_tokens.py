"""The bearer token file: format, permissions, constant-time lookup, reload without a restart."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from mcp_code_execution_mode import _tokens
from mcp_code_execution_mode._tokens import (
    StaticTokenVerifier,
    TokenFileError,
    add_token,
    read_tokens,
)


def test_added_tokens_are_stored_as_hashes_in_a_private_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    alice = add_token(path, "alice")
    bob = add_token(path, "bob@example.com")
    text = path.read_text()
    assert alice not in text
    assert bob not in text
    assert text.splitlines() == [
        f"alice sha256:{hashlib.sha256(alice.encode()).hexdigest()}",
        f"bob@example.com sha256:{hashlib.sha256(bob.encode()).hexdigest()}",
    ]
    assert path.stat().st_mode & 0o777 == 0o600
    assert len(alice) >= 43  # 256 random bits
    assert [t.name for t in read_tokens(path)] == ["alice", "bob@example.com"]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("", "holds no token"),
        ("# only a comment\n\n", "holds no token"),
        ("alice s3cr3t-token-pasted-here\n", "line 1 is not `NAME sha256:HEX`"),
        ("alice sha256:" + "A" * 64 + "\n", "line 1"),
        ("bad name sha256:" + "a" * 64 + "\n", "line 1"),
    ],
)
def test_a_malformed_token_file_is_refused_naming_the_line_not_quoting_it(
    tmp_path: Path, content: str, expected: str
) -> None:
    path = tmp_path / "tokens"
    path.write_text(content)
    path.chmod(0o600)
    with pytest.raises(TokenFileError) as raised:
        read_tokens(path)
    assert expected in str(raised.value)
    assert "MCP_BRIDGE_HTTP_TOKEN_FILE" in str(raised.value)
    assert "s3cr3t" not in str(raised.value)


@pytest.mark.parametrize("mode", [0o644, 0o604, 0o660, 0o620, 0o606])
def test_a_token_file_other_users_can_read_or_change_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "tokens"
    add_token(path, "alice")
    path.chmod(mode)
    with pytest.raises(TokenFileError) as raised:
        read_tokens(path)
    assert f"chmod 600 {path}" in str(raised.value)


def test_a_group_readable_token_file_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    add_token(path, "alice")
    path.chmod(0o640)
    assert len(read_tokens(path)) == 1


def test_a_missing_token_file_names_the_command_that_makes_one(tmp_path: Path) -> None:
    with pytest.raises(TokenFileError) as raised:
        read_tokens(tmp_path / "absent")
    assert "mcp-code-execution-mode token NAME" in str(raised.value)


def test_adding_to_an_unsafe_file_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    add_token(path, "alice")
    path.chmod(0o666)
    before = path.read_text()
    with pytest.raises(TokenFileError):
        add_token(path, "mallory")
    assert path.read_text() == before


async def test_the_verifier_names_the_principal_and_refuses_anything_else(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    alice = add_token(path, "alice")
    verifier = StaticTokenVerifier(path)
    found = await verifier.verify_token(alice)
    assert found is not None
    assert (found.client_id, found.subject, found.scopes) == ("alice", "alice", [])
    for wrong in ("", alice[:-1], alice + "x", alice.upper(), "x" * 100_000):
        assert await verifier.verify_token(wrong) is None


async def test_tokens_added_or_revoked_take_effect_without_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_tokens, "RECHECK_INTERVAL", 0.0)
    path = tmp_path / "tokens"
    alice = add_token(path, "alice")
    verifier = StaticTokenVerifier(path)
    bob = add_token(path, "bob")
    assert (await verifier.verify_token(bob)) is not None
    # Revoke alice: her line goes.
    lines = [line for line in path.read_text().splitlines() if not line.startswith("alice ")]
    path.write_text("\n".join(lines) + "\n")
    os.utime(path, ns=(0, 1))  # a new mtime even on a coarse clock
    assert await verifier.verify_token(alice) is None
    assert await verifier.verify_token(bob) is not None
    # A file that turns unsafe lets nobody in until it is fixed.
    path.chmod(0o666)
    assert await verifier.verify_token(bob) is None
    path.chmod(0o600)
    assert await verifier.verify_token(bob) is not None
