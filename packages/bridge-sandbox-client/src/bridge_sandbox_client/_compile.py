"""Compile a cell: top-level ``await`` allowed, the trailing expression split off for its value."""

from __future__ import annotations

import ast
import inspect
import linecache
from dataclasses import dataclass
from types import CodeType

__all__ = ["CompiledCell", "compile_cell", "is_async"]

_FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT


@dataclass(frozen=True, slots=True)
class CompiledCell:
    """The code of one execution: ``body`` runs first, then ``trailing`` (an expression) if any."""

    filename: str
    tree: ast.Module
    body: CodeType | None
    trailing: CodeType | None
    names_asyncio: bool = False
    """Whether the source mentions ``asyncio`` (the event loop is then made before it runs)."""

    @property
    def is_async(self) -> bool:
        """Whether any part uses top-level ``await`` (then it must run on the event loop)."""
        return any(code is not None and is_async(code) for code in (self.body, self.trailing))


def is_async(code: CodeType) -> bool:
    """Whether evaluating ``code`` returns a coroutine (it contains top-level await)."""
    return bool(code.co_flags & inspect.CO_COROUTINE)


def compile_cell(source: str, filename: str) -> CompiledCell:
    """Register ``source`` with linecache under ``filename`` and compile it.

    ``dont_inherit`` keeps this module's ``from __future__`` imports out of user code. Raises
    SyntaxError (with ``filename`` and the user's line) for invalid code.
    """
    lines = source.splitlines(keepends=True)
    # mtime None: linecache.checkcache never evicts it, so tracebacks of functions defined in
    # this cell still show their source lines executions later.
    linecache.cache[filename] = (len(source), None, lines, filename)
    tree = compile(source, filename, "exec", _FLAGS | ast.PyCF_ONLY_AST, dont_inherit=True)
    assert isinstance(tree, ast.Module)
    trailing: CodeType | None = None
    statements = list(tree.body)
    if statements and isinstance(statements[-1], ast.Expr):
        last = statements.pop()
        assert isinstance(last, ast.Expr)
        expression = ast.Expression(body=last.value)
        trailing = compile(expression, filename, "eval", _FLAGS, dont_inherit=True)
    body: CodeType | None = None
    if statements:
        module = ast.Module(body=statements, type_ignores=tree.type_ignores)
        body = compile(module, filename, "exec", _FLAGS, dont_inherit=True)
    return CompiledCell(
        filename=filename,
        tree=tree,
        body=body,
        trailing=trailing,
        names_asyncio="asyncio" in source,
    )
