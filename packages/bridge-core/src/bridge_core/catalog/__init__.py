"""Catalog and search: tool docs of the configured servers, fuzzy search, typed stubs, cache.

:class:`Catalog` is what the gateway uses; :class:`ToolIndex`, :func:`render_stub` and
:class:`ToolCache` are its parts, usable on their own.
"""

from bridge_core.catalog._cache import CachedTools, ToolCache
from bridge_core.catalog._catalog import MAX_SEARCH_LIMIT, Catalog, ToolLister
from bridge_core.catalog._check import (
    MAX_CHECKED_CHARS,
    CheckCatalog,
    Finding,
    FindingKind,
    check_cell,
    describe_findings,
)
from bridge_core.catalog._docs import Detail, ToolDoc
from bridge_core.catalog._errors import CatalogError, UnknownServer, UnknownTool, closest_names
from bridge_core.catalog._names import resolve_server, resolve_tool
from bridge_core.catalog._search import (
    DEFAULT_THRESHOLD,
    MAX_QUERY_CHARS,
    SearchHit,
    ToolIndex,
    normalise,
)
from bridge_core.catalog._stubs import python_name, render_stub, schema_type
from bridge_core.catalog._typecheck import (
    TypeCheck,
    checker_missing_advice,
    find_type_checker,
    type_check,
)

__all__ = [
    "Catalog",
    "CheckCatalog",
    "Finding",
    "FindingKind",
    "MAX_CHECKED_CHARS",
    "check_cell",
    "describe_findings",
    "TypeCheck",
    "checker_missing_advice",
    "find_type_checker",
    "type_check",
    "ToolLister",
    "MAX_SEARCH_LIMIT",
    "ToolDoc",
    "Detail",
    "ToolIndex",
    "SearchHit",
    "DEFAULT_THRESHOLD",
    "MAX_QUERY_CHARS",
    "normalise",
    "render_stub",
    "schema_type",
    "python_name",
    "ToolCache",
    "CachedTools",
    "CatalogError",
    "UnknownServer",
    "UnknownTool",
    "closest_names",
    "resolve_server",
    "resolve_tool",
]
