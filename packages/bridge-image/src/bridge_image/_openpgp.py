"""The fingerprints of the primary keys in an armored OpenPGP public key block.

Enough of RFC 4880 (sections 4.2, 5.5.2, 6.2 and 12.2) to tie a release record's ``fingerprint``
to its ``public_key``: skopeo's ``signedBy`` accepts a signature by ANY key in the file it is
given, so a record whose block held another key (or a second one) would show one signer and
trust another. Only the packet framing is read, never a signature; v4 keys only (what GnuPG
makes; a v6 key is refused by name).
"""

from __future__ import annotations

import base64
import binascii
import hashlib

__all__ = ["KeyBlockError", "primary_fingerprints"]

_PUBLIC_KEY = 6
"""Packet tag of a primary public key (subkeys are tag 14 and belong to the key before them)."""


class KeyBlockError(ValueError):
    """The text is not an armored OpenPGP public key block this module can read."""


def primary_fingerprints(armored: str) -> list[str]:
    """Upper-case hex fingerprints of the primary keys in ``armored``, in order."""
    fingerprints = []
    for tag, body in _packets(_dearmor(armored)):
        if tag != _PUBLIC_KEY:
            continue
        if not body or body[0] != 4:
            raise KeyBlockError(f"a version {body[0] if body else '?'} key (only v4 is read)")
        digest = hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body, usedforsecurity=False)
        fingerprints.append(digest.hexdigest().upper())
    return fingerprints


def _dearmor(armored: str) -> bytes:
    lines = armored.strip().splitlines()
    try:
        start = lines.index("-----BEGIN PGP PUBLIC KEY BLOCK-----")
        end = lines.index("-----END PGP PUBLIC KEY BLOCK-----", start)
    except ValueError:
        raise KeyBlockError("no BEGIN/END PGP PUBLIC KEY BLOCK lines") from None
    body = lines[start + 1 : end]
    while body and body[0].strip():  # armor headers ("Comment: ...") up to the blank line
        if ":" not in body[0]:
            break
        body = body[1:]
    data = [line.strip() for line in body if line.strip() and not line.startswith("=")]
    try:
        return base64.b64decode("".join(data), validate=True)
    except (binascii.Error, ValueError):
        raise KeyBlockError("the armored data is not base64") from None


def _packets(data: bytes) -> list[tuple[int, bytes]]:
    packets, at = [], 0
    while at < len(data):
        header = data[at]
        if not header & 0x80:
            raise KeyBlockError(f"no packet starts at byte {at}")
        if header & 0x40:  # new format: tag in 6 bits, then a length of 1, 2 or 5 bytes
            tag, at = header & 0x3F, at + 1
            first = _byte(data, at)
            if first < 192:
                length, at = first, at + 1
            elif first < 224:
                length, at = ((first - 192) << 8) + _byte(data, at + 1) + 192, at + 2
            elif first == 255:
                length, at = int.from_bytes(_slice(data, at + 1, 4), "big"), at + 5
            else:
                raise KeyBlockError("partial body lengths do not occur in a public key block")
        else:  # old format: tag in 4 bits, length type in 2
            tag, kind, at = (header >> 2) & 0x0F, header & 0x03, at + 1
            if kind == 3:
                raise KeyBlockError("indeterminate lengths do not occur in a public key block")
            size = (1, 2, 4)[kind]
            length, at = int.from_bytes(_slice(data, at, size), "big"), at + size
        packets.append((tag, _slice(data, at, length)))
        at += length
    return packets


def _byte(data: bytes, at: int) -> int:
    return _slice(data, at, 1)[0]


def _slice(data: bytes, at: int, length: int) -> bytes:
    if at + length > len(data):
        raise KeyBlockError("a packet runs past the end of the block")
    return data[at : at + length]
