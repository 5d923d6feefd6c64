"""Secrets masked in crash reports, including a secret cut by the stderr tail's start."""

from __future__ import annotations

from bridge_core.proxy.gateway import _mask_cut_secret

SECRET = "token-0123456789abcdef"


def test_end_of_a_secret_at_the_start_of_a_stderr_tail_is_masked() -> None:
    message = "MCP server 'x' exited with status 3; stderr tail:\n89abcdef and more"
    assert _mask_cut_secret(message, SECRET) == (
        "MCP server 'x' exited with status 3; stderr tail:\n*** and more"
    )


def test_a_bare_tail_starting_inside_a_secret_is_masked() -> None:
    assert _mask_cut_secret("cdef\nnext line", SECRET) == "***\nnext line"


def test_text_that_merely_shares_two_letters_with_the_secret_end_is_kept() -> None:
    assert _mask_cut_secret("ef is fine", SECRET) == "ef is fine"
    assert _mask_cut_secret("no tail here: 89abcdef", SECRET) == "no tail here: 89abcdef"
