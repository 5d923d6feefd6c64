"""Version negotiation: the highest common version wins; no common version is a typed refusal."""

from __future__ import annotations

import pytest
from bridge_protocol import (
    CURRENT_VERSION,
    SUPPORTED_VERSIONS,
    ErrorCode,
    FrameDecoder,
    Hello,
    Ping,
    Refusal,
    UnexpectedMessage,
    UnsupportedVersion,
    Welcome,
    answer_hello,
    encode,
    negotiate,
    version_from_answer,
)


def test_the_current_version_is_the_highest_supported_one() -> None:
    assert max(SUPPORTED_VERSIONS) == CURRENT_VERSION
    assert list(SUPPORTED_VERSIONS) == sorted(set(SUPPORTED_VERSIONS))


@pytest.mark.parametrize(
    ("offered", "supported", "chosen"),
    [
        ((1,), (1,), 1),
        ((1, 2, 3), (2, 3, 4), 3),
        ((5, 1), (1, 5, 9), 5),
        ((2,), (1,), None),
        ((), (1,), None),
    ],
)
def test_negotiation_picks_the_highest_common_version(
    offered: tuple[int, ...], supported: tuple[int, ...], chosen: int | None
) -> None:
    assert negotiate(offered, supported) == chosen


def test_host_welcomes_a_sandbox_with_a_common_version() -> None:
    answer = answer_hello(Hello(versions=(1, 2)), session="s1", supported=(1, 2, 3))
    assert answer == Welcome(version=2, session="s1")


def test_host_refuses_a_sandbox_with_no_common_version() -> None:
    answer = answer_hello(Hello(versions=(7, 8)), supported=(1, 2))
    assert isinstance(answer, Refusal)
    assert answer.code == ErrorCode.UNSUPPORTED_VERSION
    assert answer.supported == (1, 2)


def test_a_refusal_crosses_the_wire_and_the_sandbox_raises_unsupported_version() -> None:
    refusal = answer_hello(Hello(versions=(99,)))
    (received,) = FrameDecoder().feed(encode(refusal))
    with pytest.raises(UnsupportedVersion) as caught:
        version_from_answer(received)
    assert caught.value.code == ErrorCode.UNSUPPORTED_VERSION


def test_the_sandbox_takes_the_welcomed_version() -> None:
    assert version_from_answer(Welcome(version=1), offered=(1,)) == 1


def test_the_sandbox_rejects_a_version_it_never_offered() -> None:
    with pytest.raises(UnsupportedVersion):
        version_from_answer(Welcome(version=2), offered=(1,))


def test_anything_but_welcome_or_refusal_after_hello_is_unexpected() -> None:
    with pytest.raises(UnexpectedMessage) as caught:
        version_from_answer(Ping(1))
    assert caught.value.code == ErrorCode.UNEXPECTED_MESSAGE


def test_a_refusal_to_a_hello_listing_thousands_of_versions_stays_short() -> None:
    answer = answer_hello(Hello(versions=tuple(range(1000, 5000))), supported=(1,))
    assert isinstance(answer, Refusal)
    assert len(answer.message) < 200
