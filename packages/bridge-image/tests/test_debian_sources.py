from pathlib import Path

from bridge_image import _debian


def _apt_dir(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_mirrors_come_from_the_hosts_deb822_sources(tmp_path: Path) -> None:
    apt = _apt_dir(
        tmp_path,
        {
            "sources.list.d/nodesource.sources": "Types: deb\nURIs: https://deb.nodesource.com/node_20.x\n",
            "sources.list.d/debian.sources": (
                "Types: deb\n# http://snapshot.debian.org/archive/debian/20250520T000000Z\n"
                "URIs: http://mirror.example/debian/\nSuites: bookworm\n\n"
                "Types: deb\nURIs: http://mirror.example/debian-security\n"
            ),
        },
    )
    assert _debian.find_mirrors(apt) == (
        "http://mirror.example/debian",
        "http://mirror.example/debian-security",
    )


def test_mirrors_come_from_one_line_sources_with_options(tmp_path: Path) -> None:
    apt = _apt_dir(
        tmp_path,
        {
            "sources.list": "# deb http://old/debian bookworm main\n"
            "deb [arch=amd64 signed-by=/k.gpg] http://local/debian bookworm main\n"
        },
    )
    debian, security = _debian.find_mirrors(apt)
    assert debian == "http://local/debian"
    assert security == "http://deb.debian.org/debian-security"


def test_a_host_without_debian_sources_uses_deb_debian_org(tmp_path: Path) -> None:
    apt = _apt_dir(
        tmp_path, {"sources.list": "deb http://archive.ubuntu.com/ubuntu noble main universe\n"}
    )
    assert _debian.find_mirrors(apt) == (
        _debian.DEFAULT_MIRROR,
        "http://deb.debian.org/debian-security",
    )


def test_source_lines_cover_release_updates_and_security() -> None:
    lines = _debian.source_lines("http://m/debian", "http://m/debian-security")
    assert lines == [
        "deb http://m/debian trixie main",
        "deb http://m/debian trixie-updates main",
        "deb http://m/debian-security trixie-security main",
    ]


def test_bootstrap_includes_python_venv_and_apt_sorted_without_duplicates() -> None:
    assert _debian.include_list(["jq", "python3", "git"]) == [
        "apt",
        "git",
        "jq",
        "python3",
        "python3-venv",
    ]
