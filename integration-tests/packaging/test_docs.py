"""The documentation site: the generated API reference matches the code it documents, and the
README's Documentation section and the site's nav list every page under docs/."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GENERATOR = REPO / "scripts" / "sandbox_api_reference.py"
DOCS = REPO / "docs"


def test_sandbox_api_reference_page_matches_the_sandbox_client_docstrings() -> None:
    checked = subprocess.run(
        [sys.executable, str(GENERATOR), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stderr


def test_sandbox_api_reference_names_every_runtime_helper_and_exception() -> None:
    from bridge_sandbox_client import errors

    page = (REPO / "docs" / "sandbox-api-reference.md").read_text(encoding="utf-8")
    for name in ("discovered_servers", "list_tools", "query_tool_docs", "search_tool_docs"):
        assert f"### `runtime.{name}`" in page
        assert f"### `runtime.{name}_sync`" in page
    for name in errors.__all__:
        if name != "error_from_fault":
            assert f"| `{name}` |" in page


def test_configuration_page_states_the_default_of_every_setting_as_the_code_has_it() -> None:
    from mcp_code_execution_mode.settings import SETTINGS

    page = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    documented = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^\| `(MCP_BRIDGE_\w+)` \| `--[\w-]+` \| ([^|]+?) \|", page, re.M)
    }
    for setting in SETTINGS:
        shown = documented.get(setting.env)
        assert shown is not None, f"{setting.env} is not in docs/configuration.md"
        if setting.default is None:
            # Unset, or for the state dir and the log file the place used when it is unset.
            assert shown == "unset" or setting.env in (
                "MCP_BRIDGE_STATE_DIR",
                "MCP_BRIDGE_LOG_FILE",
            ), setting.env
        else:
            assert shown == f"`{setting.default}`", setting.env


def _pages() -> set[str]:
    return {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}


def _readme_links() -> set[str]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    match = re.search(r"^## Documentation\n(.*?)(?=^## |\Z)", readme, re.M | re.S)
    assert match is not None, "README.md has no '## Documentation' section"
    return set(re.findall(r"\]\(docs/([^)#\s]+\.md)(?:#[^)]*)?\)", match.group(1)))


def _nav_pages() -> set[str]:
    config = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    match = re.search(r"^nav:\n((?:[ \t]+.*\n?)*)", config, re.M)
    assert match is not None, "mkdocs.yml has no nav"
    return set(re.findall(r"([\w./-]+\.md)\s*$", match.group(1), re.M))


def test_the_readme_documentation_section_links_every_page_under_docs() -> None:
    missing = sorted(_pages() - _readme_links())
    assert not missing, f"add these pages to README.md's Documentation section: {missing}"


def test_the_mkdocs_nav_lists_every_page_under_docs() -> None:
    missing = sorted(_pages() - _nav_pages())
    assert not missing, f"add these pages to the nav in mkdocs.yml: {missing}"


def test_the_readme_and_the_nav_name_only_pages_that_exist() -> None:
    assert _readme_links() <= _pages()
    assert _nav_pages() <= _pages()
