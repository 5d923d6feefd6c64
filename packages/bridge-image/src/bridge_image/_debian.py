"""The Debian mirror of the offline bootstrap base, found in the host's apt sources."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

__all__ = ["DEFAULT_MIRROR", "SUITE", "find_mirrors", "include_list", "source_lines"]

SUITE = "trixie"
"""Debian 13, the newest stable release: its python3 is 3.13, the interpreter line the image's
cp313 wheels need (the normal path's python:3.13-slim-trixie has the same)."""

DEFAULT_MIRROR = "http://deb.debian.org/debian"
_DEFAULT_SECURITY = "http://deb.debian.org/debian-security"


def _uris(text: str, deb822: bool) -> list[str]:
    uris: list[str] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if deb822 and line.lower().startswith("uris:"):
            uris.extend(line.split(":", 1)[1].split())
        elif not deb822 and line.startswith("deb "):
            words = [w for w in line.split() if not w.startswith("[") and not w.endswith("]")]
            if len(words) >= 2:
                uris.append(words[1])
    return uris


def _host_uris(apt_dir: Path) -> list[str]:
    files: list[tuple[Path, bool]] = [(apt_dir / "sources.list", False)]
    parts = apt_dir / "sources.list.d"
    if parts.is_dir():
        files.extend((f, f.suffix == ".sources") for f in sorted(parts.iterdir()))
    uris: list[str] = []
    for file, deb822 in files:
        if file.is_file() and file.suffix in {".list", ".sources"}:
            uris.extend(_uris(file.read_text(errors="replace"), deb822))
    return [u.rstrip("/") for u in uris]


def find_mirrors(apt_dir: Path = Path("/etc/apt")) -> tuple[str, str]:
    """Return ``(debian, debian_security)`` mirror URLs, preferring those the host already uses
    (a host behind a local mirror or proxy can reach only those); deb.debian.org otherwise."""
    uris = _host_uris(apt_dir)
    debian = next((u for u in uris if u.endswith("/debian")), DEFAULT_MIRROR)
    security = next((u for u in uris if u.endswith("/debian-security")), _DEFAULT_SECURITY)
    return debian, security


def source_lines(debian: str, security: str, suite: str = SUITE) -> list[str]:
    """One-line apt sources for mmdebstrap: the release, its updates and its security fixes."""
    return [
        f"deb {debian} {suite} main",
        f"deb {debian} {suite}-updates main",
        f"deb {security} {suite}-security main",
    ]


def include_list(system_packages: Iterable[str]) -> list[str]:
    """The packages of the bootstrap root filesystem: Python, venv support, apt (so images FROM
    it can add packages, as on the python base), and the sandbox's system packages."""
    return sorted({"apt", "python3", "python3-venv", *system_packages})
