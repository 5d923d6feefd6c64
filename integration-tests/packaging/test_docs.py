"""The documentation site: the generated API reference matches the code it documents, and the
README's Documentation section and the site's nav list every page under docs/ (the README lists a
folder of pages, such as docs/decisions/, by the folder's index page)."""

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


def _listed_by_their_index(pages: set[str], links: set[str]) -> set[str]:
    """Pages of a folder of pages (``decisions/0001-....md``) that the folder's index page
    (``decisions.md``) lists: the README links the index, the nav lists every page."""
    return {p for p in pages if "/" in p and f"{p.split('/', 1)[0]}.md" in links}


def test_the_readme_documentation_section_links_every_page_under_docs() -> None:
    links = _readme_links()
    missing = sorted(_pages() - links - _listed_by_their_index(_pages(), links))
    assert not missing, f"add these pages to README.md's Documentation section: {missing}"


def test_the_mkdocs_nav_lists_every_page_under_docs() -> None:
    missing = sorted(_pages() - _nav_pages())
    assert not missing, f"add these pages to the nav in mkdocs.yml: {missing}"


def test_the_readme_and_the_nav_name_only_pages_that_exist() -> None:
    assert _readme_links() <= _pages()
    assert _nav_pages() <= _pages()


# --- repository paths named in the docs ---------------------------------------------------------

_SCANNED_ROOTS = ("packages", "scripts", "integration-tests", "bench", "images", "docs", ".ci")
"""Top-level folders whose files the docs name; a backticked path under one of them is checked."""
_SOURCE_FOLDERS = (*_SCANNED_ROOTS, "conftest.py")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_PATH_TOKEN = re.compile(r"[\w.*<>/-]+")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^(#{1,6}) ")
_HISTORY_NOTE = re.compile(r"^\*.*\b(retired|removed)\b", re.I)

_NOT_IN_A_CHECKOUT = {
    # Written into mcp-bridge-image's wheel by the release and by its build hook
    # (packages/bridge-image/hatch_build.py); the pages say so where they name them.
    "bridge_image/release.json",
    "packages/bridge-image/src/bridge_image/release.json",
    "bridge_image/_recipe/",
}
_OTHER_REPOSITORIES = {
    # kubernetes-sigs/agent-sandbox's own API page, named as that project's file.
    ("scale-out.md", "docs/api.md"),
}


def _doc_files() -> list[Path]:
    return [*sorted(DOCS.rglob("*.md")), REPO / "README.md"]


def _source_names() -> set[str]:
    names: set[str] = set()
    for folder in _SOURCE_FOLDERS:
        for path in (REPO / folder).rglob("*"):
            if "__pycache__" not in path.parts:
                names.add(path.name)
    return names


def _bases() -> list[Path]:
    """Where a path named relative to a folder of this repository may start: the repository,
    each package (``tests/...``), each package's src (``bridge_core/...``), each top-level
    package in it (``proxy/_stdio.py``), and each test tree (``runtime/test_hardening.py``)."""
    packages = sorted(p for p in (REPO / "packages").iterdir() if p.is_dir())
    sources = [p / "src" for p in packages]
    imported = sorted(p for src in sources for p in src.iterdir() if (p / "__init__.py").exists())
    tests = [*(p / "tests" for p in packages), REPO / "integration-tests"]
    return [REPO, *packages, *sources, *imported, *tests]


def _relative_roots(bases: list[Path]) -> set[str]:
    """First components of a path named relative to a folder other than the repository's."""
    roots = {"tests"}
    for base in bases[1:]:
        if base.parent.name != "packages":  # a package's own folders are src/ and tests/
            roots.update(p.name for p in base.iterdir() if p.is_dir() and p.name != "__pycache__")
    return roots


def _exists(token: str, bases: list[Path], source_names: set[str]) -> bool:
    pattern = re.sub(r"<[^>]*>", "*", token.removeprefix("./"))
    if "/" not in pattern:  # a bare file name: one of that name exists somewhere
        return pattern in source_names
    for base in bases:
        if "*" in pattern:
            if any(base.glob(pattern.rstrip("/"))):
                return True
        elif (base / pattern).exists():
            return True
    return False


def _candidates(line: str, in_fence: bool, relative_roots: set[str]) -> list[str]:
    spans = [line] if in_fence else [m.group(2) for m in _CODE_SPAN.finditer(line)]
    found = []
    for span in spans:
        for token in _PATH_TOKEN.findall(span):
            token = token.rstrip(".")
            path = token.removeprefix("./")
            first, _, rest = path.partition("/")
            if rest or path.endswith("/"):
                if first in _SCANNED_ROOTS:
                    found.append(token)
                elif first in relative_roots and re.search(r"\.\w+$", rest):
                    # Relative to a package or a test tree: files only (the state directory
                    # has folders of the same names as the subpackages: `runtime/`, `sessions/`).
                    found.append(token)
            elif re.fullmatch(r"\w+\.py", token) and not in_fence:
                found.append(token)  # a module named by its file name alone
    return found


def _dead_paths() -> list[str]:
    bases = _bases()
    roots = _relative_roots(bases)
    source_names = _source_names()
    dead = []
    for doc in _doc_files():
        shown = doc.relative_to(REPO).as_posix()
        in_fence = False
        history_level = 0  # the level of the heading of the history section we are in, or 0
        heading_line = -1
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith("```"):
                in_fence = not in_fence
                continue
            if not in_fence and (heading := _HEADING.match(line)):
                level = len(heading.group(1))
                if history_level and level <= history_level:
                    history_level = 0
                heading_line, heading_level = number, level
                continue
            if not in_fence and line.strip() and heading_line > 0:
                # The first paragraph under a heading: an italic note that it was retired.
                if _HISTORY_NOTE.match(line) and not history_level:
                    history_level = heading_level
                heading_line = -1
            if history_level:
                continue
            for token in _candidates(line, in_fence, roots):
                if token in _NOT_IN_A_CHECKOUT or (doc.name, token) in _OTHER_REPOSITORIES:
                    continue
                if not _exists(token, bases, source_names):
                    dead.append(f"{shown}:{number}: {token}")
            if in_fence:
                continue
            for link in _LINK.findall(line):
                target = link.split("#")[0]
                if not target or re.match(r"[a-z][\w+.-]*:", target):
                    continue  # an anchor on the same page, or a URL
                if not (doc.parent / target).exists():
                    dead.append(f"{shown}:{number}: {link}")
    return dead


def test_every_repository_path_the_docs_name_exists() -> None:
    """Scans docs/**/*.md and README.md for what names a file of this repository: backticked
    paths (``packages/...``, ``scripts/...``, ``integration-tests/...``, ``bench/...``,
    ``images/...``, ``docs/...``, ``.ci/...``; also ``tests/...`` of a package, ``bridge_core/...``
    under a package's src, ``proxy/_stdio.py`` under a top-level package, ``<N>`` as a wildcard),
    backticked module file names (``_stdio.py``: one of that name must exist), the same paths in
    fenced code blocks, and markdown links to relative files. Each one that does not exist fails,
    named by doc, line and path.

    Removed files in history: a section whose first paragraph is an italic note that it was
    retired or removed (``*Retired 2026-12-04 (issue 33): ...*``) is left as written, names of
    files that are gone included: it records what the code was then, and ``git log -- <path>``
    finds them. Everywhere else a removed file is "the former X" without its path. CHANGELOG.md
    is history throughout and not scanned. Paths that exist only in a built wheel and paths of
    other projects are listed above with their reason.
    """
    dead = _dead_paths()
    assert not dead, "paths named in the docs that do not exist:\n" + "\n".join(dead)


# --- deprecated settings named in the docs ------------------------------------------------------

_DEPRECATED_NAMES_ALLOWED = {
    # The table of the old variables and where each went: the one place that names them all.
    "configuration.md": "## Deprecated names",
}
"""Pages allowed to name a deprecated variable, in the section under that heading. The decision
records (docs/decisions/ and decisions.md) and CHANGELOG.md are history and
not scanned."""
_SETTING_NAME = re.compile(r"MCP_BRIDGE_[\w{},]+|(?<![\w-])--[a-z][\w-]*")


def _brace_expansions(token: str) -> list[str]:
    """``MCP_BRIDGE_{ALLOW,DENY}_SERVERS`` → both names; a token without braces → itself."""
    match = re.search(r"\{([^{}]*)\}", token)
    if match is None:
        return [token.rstrip(",")]
    return [
        name
        for option in match.group(1).split(",")
        for name in _brace_expansions(token[: match.start()] + option + token[match.end() :])
    ]


def _outside_allowed_section(doc: Path) -> list[tuple[int, str]]:
    """The numbered lines of a page that may not name a deprecated variable."""
    lines = list(enumerate(doc.read_text(encoding="utf-8").splitlines(), 1))
    allowed = _DEPRECATED_NAMES_ALLOWED.get(doc.name, "") if doc.parent == DOCS else ""
    if not allowed:
        return lines
    level = allowed.split(" ", 1)[0]
    kept, inside, in_fence = [], False, False
    for number, line in lines:
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        elif not in_fence and (heading := _HEADING.match(line)):
            if line == allowed:
                inside = True
            elif len(heading.group(1)) <= len(level):
                inside = False
        if not inside:
            kept.append((number, line))
    return kept


def _deprecated_names_in_the_docs() -> list[str]:
    from mcp_code_execution_mode._deprecated import MOVED, NEVER_READ, old_flag

    homes = {
        **MOVED,
        **{old_flag(variable): home for variable, home in MOVED.items()},
        **NEVER_READ,  # no flag: `--tools` is serve's own
    }
    pages = [
        REPO / "README.md",
        *(p for p in sorted(DOCS.glob("*.md")) if p.name != "decisions.md"),
    ]
    found = []
    for doc in pages:
        shown = doc.relative_to(REPO).as_posix()
        for number, line in _outside_allowed_section(doc):
            for token in _SETTING_NAME.findall(line):
                for name in _brace_expansions(token):
                    if name in homes:
                        found.append(f"{shown}:{number}: {name} -> {homes[name]}")
    return found


def test_allowed_sections_for_deprecated_names_exist() -> None:
    for page, heading in _DEPRECATED_NAMES_ALLOWED.items():
        text = (DOCS / page).read_text(encoding="utf-8")
        assert heading is None or heading in text.splitlines(), f"{page} has no {heading!r}"


def test_the_docs_name_no_deprecated_variable_outside_the_table_of_old_names() -> None:
    """README.md and docs/*.md tell users to set the bridge.toml key (``[sessions] max``), not
    the deprecated ``MCP_BRIDGE_*`` variable or its flag that still works for one release (the
    names are those of ``_deprecated.MOVED``, and ``NEVER_READ``'s, never settings; a bound that
    became a constant is named as the constant). Brace forms (``MCP_BRIDGE_{ALLOW,DENY}_TOOLS``)
    are expanded. Only the table of old names in docs/configuration.md names them; the decision
    records and CHANGELOG.md are history.
    """
    found = _deprecated_names_in_the_docs()
    assert not found, (
        "the docs name deprecated settings; write the bridge.toml key (or the fixed bound) "
        "instead:\n" + "\n".join(found)
    )


# --- the token figures, quoted in several places -----------------------------------------------

_TOKEN_HEADER = "| tokens | all schemas up front | deferred schemas | this bridge |"


def _token_rows(text: str) -> list[list[str]]:
    """The rows of every three-column token table (README's measured figures) in ``text``."""
    rows: list[list[str]] = []
    inside = False
    for line in text.splitlines():
        if line == _TOKEN_HEADER:
            inside = True
        elif inside and line.startswith("|"):
            if not line.startswith("|---"):
                rows.append([cell.strip().strip("*") for cell in line.strip("|").split("|")])
        else:
            inside = False
    return rows


def _token_section() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    return readme.split("## Why: the tokens we measured", 1)[1].split("\n## ", 1)[0]


def test_the_docs_token_tables_are_the_readmes() -> None:
    readme = _token_rows(_token_section())
    assert len(readme) == 6, "README's two token tables changed shape"
    assert _token_rows((DOCS / "performance.md").read_text(encoding="utf-8")) == readme


def test_the_docs_index_quotes_the_readmes_token_figures() -> None:
    # The figures are measured again now and then (hatch run bench-tokens:run) and README is
    # updated: the index's summary of them went stale once (235 tokens where README said 239).
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    summary = index.split("\n\n", 2)[1]
    quoted = set(re.findall(r"\d[\d,]*\d", summary))
    measured = set(re.findall(r"\d[\d,]*\d", _token_section()))
    assert quoted, "the index no longer quotes token figures"
    assert quoted <= measured, f"docs/index.md quotes figures README does not: {quoted - measured}"
