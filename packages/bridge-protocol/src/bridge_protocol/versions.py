"""The protocol version registry, separate from the package version, and the handshake rule.

Versions are consecutive integers. A wire change adds a version here and a golden-vector directory
(``tests/vectors/vN``); old vectors keep decoding. The handshake messages (``hello``, ``welcome``,
``refusal``) are frozen across versions, so any two peers can always negotiate: the sandbox sends
the versions it speaks, the host answers with the highest common one or a refusal.
"""

from __future__ import annotations

from collections.abc import Iterable

from bridge_protocol.errors import ErrorCode, UnexpectedMessage, UnsupportedVersion
from bridge_protocol.messages import Hello, Message, Refusal, Welcome

__all__ = [
    "CURRENT_VERSION",
    "SUPPORTED_VERSIONS",
    "answer_hello",
    "negotiate",
    "version_from_answer",
]

SUPPORTED_VERSIONS: tuple[int, ...] = (1, 2)
"""Every protocol version this package speaks, oldest first. Version 2 adds ``snapshot_copy``
(a sandbox sends it only once version 2 was chosen); every version-1 frame is unchanged."""
CURRENT_VERSION: int = max(SUPPORTED_VERSIONS)


def negotiate(offered: Iterable[int], supported: Iterable[int] = SUPPORTED_VERSIONS) -> int | None:
    """Return the highest version in both ``offered`` and ``supported``, or None if none."""
    common = set(offered) & set(supported)
    return max(common) if common else None


def answer_hello(
    hello: Hello, *, session: str = "", supported: Iterable[int] = SUPPORTED_VERSIONS
) -> Welcome | Refusal:
    """The host's answer to a ``hello``: ``Welcome``, or a refusal with ``UNSUPPORTED_VERSION``."""
    ours = tuple(sorted(set(supported)))
    version = negotiate(hello.versions, ours)
    if version is None:
        return Refusal(
            code=ErrorCode.UNSUPPORTED_VERSION,
            message=(
                f"the sandbox speaks protocol versions {_describe(hello.versions)}, "
                f"the host speaks {_describe(ours)}"
            ),
            supported=ours,
        )
    return Welcome(version=version, session=session)


def _describe(versions: Iterable[int]) -> str:
    # A hostile hello may list a million versions: keep the refusal message short.
    ordered = sorted(set(versions))
    shown = ", ".join(map(str, ordered[:8]))
    return f"[{shown}, ... ({len(ordered)} in all)]" if len(ordered) > 8 else f"[{shown}]"


def version_from_answer(answer: Message, offered: Iterable[int] = SUPPORTED_VERSIONS) -> int:
    """The sandbox's reading of the host's answer to its ``hello``: the version to speak.

    Raises :class:`UnsupportedVersion` for a refusal or a welcome naming a version that was not
    offered, and :class:`UnexpectedMessage` for any other message.
    """
    if isinstance(answer, Refusal):
        raise UnsupportedVersion(
            f"the host refused the handshake ({answer.code}): {answer.message}"
        )
    if not isinstance(answer, Welcome):
        raise UnexpectedMessage(f"expected welcome or refusal, got {type(answer).KIND!r}")
    if answer.version not in set(offered):
        raise UnsupportedVersion(f"the host chose protocol version {answer.version}, never offered")
    return answer.version
