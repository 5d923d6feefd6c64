"""``runtime`` workflow helpers against a fake host that keeps workflows in memory: what a
function must be to be saved, loading runs the source here in a fresh namespace, both call
forms (with and without ``await``)."""

from __future__ import annotations

import ast
from typing import Any

import pytest
from bridge_protocol import ErrorCode, Request

from .conftest import (  # type: ignore[import-not-found]  # pytest (importlib mode) resolves it
    FakeHost,
    HostFault,
)


class Kept:
    """The host's side of workflows, in memory: enough to test the sandbox's half."""

    def __init__(self, host: FakeHost) -> None:
        self.saved: dict[str, list[dict[str, Any]]] = {}
        self._fallback = host._request
        host._request = self.request

    def request(self, method: str, params: dict[str, Any]) -> Any:
        if method == "save_workflow":
            tree = ast.parse(params["source"])
            (node,) = tree.body
            assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            versions = self.saved.setdefault(params["name"], [])
            entry = {
                "name": params["name"],
                "version": len(versions) + 1,
                "source": params["source"],
                "function": node.name,
                "description": params["description"] or "",
                "tools": [],
            }
            versions.append(entry)
            return {"name": params["name"], "version": entry["version"]}
        if method == "get_workflow":
            versions = self.saved.get(params["name"], [])
            if not versions:
                raise HostFault(ErrorCode.UNKNOWN_TOOL, f"no workflow named {params['name']!r}")
            wanted = params["version"]
            return versions[-1] if wanted is None else versions[wanted - 1]
        if method == "list_workflows":
            return [{"name": n, "version": len(v)} for n, v in sorted(self.saved.items())]
        if method == "search_workflows":
            return [{"kind": "workflow", "name": n, "score": 50.0} for n in self.saved][
                : params["limit"]
            ]
        if method == "delete_workflow":
            versions = self.saved.pop(params["name"])
            return {"name": params["name"], "deleted": [v["version"] for v in versions]}
        return self._fallback(method, params)


def ok(host: FakeHost, code: str) -> str | None:
    run = host.execute(code)
    assert run.result.status == "ok", run.result.error
    return run.result.value


def error(host: FakeHost, code: str) -> tuple[str, str]:
    run = host.execute(code)
    assert run.result.status == "error"
    assert run.result.error is not None
    return run.result.error.type, run.result.error.message


DEFINE = (
    "async def monthly(month):\n"
    '    """Sales of a month."""\n'
    "    import json\n"
    "    r = await mcp_servers['github'].create_issue(title=month)\n"
    "    return json.dumps(r)\n"
)


def test_a_saved_async_function_sends_its_source_and_loads_and_calls_tools(host: FakeHost) -> None:
    kept = Kept(host)
    assert ok(host, DEFINE + "runtime.save_workflow(monthly, description='d')") == (
        "{'name': 'monthly', 'version': 1}"
    )
    assert kept.saved["monthly"][0]["source"] == DEFINE
    run = host.execute("f = runtime.workflow('monthly')\nawait f('may')")
    assert run.result.status == "ok", run.result.error
    assert run.result.value == '\'{"number": 7, "title": "may"}\''
    assert [(c.server, c.tool) for c in run.calls] == [("github", "create_issue")]


def test_every_helper_works_with_and_without_await(host: FakeHost) -> None:
    Kept(host)
    code = (
        "def double(x):\n    return 2 * x\n"
        "a = await runtime.save_workflow(double)\n"
        "b = runtime.save_workflow(double, name='twice')\n"
        "w1 = await runtime.workflow('double')\n"
        "w2 = runtime.workflow('twice', version=1)\n"
        "l1 = await runtime.list_workflows()\n"
        "l2 = runtime.list_workflows()\n"
        "s1 = await runtime.search_workflows('double', limit=1)\n"
        "s2 = runtime.search_workflows('double')\n"
        "d = await runtime.delete_workflow('twice')\n"
        "(a['version'], b['name'], w1(2), w2(3), len(l1), l1 == l2, len(s1), len(s2), d['deleted'])"
    )
    assert ok(host, code) == "(1, 'twice', 4, 6, 2, True, 1, 2, [1])"


def test_a_workflow_runs_in_a_fresh_namespace_and_can_load_another(host: FakeHost) -> None:
    Kept(host)
    ok(host, "def inner(x):\n    return x + 1\nruntime.save_workflow(inner)")
    ok(
        host,
        "def outer(x):\n    return runtime.workflow('inner')(x) * 10\nruntime.save_workflow(outer)",
    )
    code = "secret_of_session = 5\nw = runtime.workflow('outer')\n(w(1), w.__name__, repr(w))"
    assert ok(host, code) == "(20, 'outer', '<workflow outer v1(x)>')"


def test_an_older_version_stays_loadable_by_number(host: FakeHost) -> None:
    Kept(host)
    ok(host, "def f():\n    return 'one'\nruntime.save_workflow(f)")
    ok(host, "def f():\n    return 'two'\nruntime.save_workflow(f)")
    assert ok(host, "(runtime.workflow('f')(), runtime.workflow('f', 1)())") == "('two', 'one')"


def test_a_loaded_workflow_can_be_saved_again_under_another_name(host: FakeHost) -> None:
    kept = Kept(host)
    ok(host, "def f():\n    return 1\nruntime.save_workflow(f)")
    ok(host, "runtime.save_workflow(runtime.workflow('f'), name='g')")
    assert kept.saved["g"][0]["source"] == kept.saved["f"][0]["source"]


def test_an_error_in_a_workflow_shows_its_own_source_line(host: FakeHost) -> None:
    Kept(host)
    ok(
        host,
        "def boom():\n    raise ValueError('inside the workflow')\nruntime.save_workflow(boom)",
    )
    kind, message = error(host, "runtime.workflow('boom')()")
    assert kind == "ValueError"
    assert "inside the workflow" in message


@pytest.mark.parametrize(
    ("code", "kind", "says"),
    [
        ("runtime.save_workflow(lambda: 1)", "ValueError", "lambda"),
        ("runtime.save_workflow(len)", "TypeError", "built-in"),
        ("import json\nruntime.save_workflow(json.dumps)", "ValueError", "not defined in this"),
        (
            "def outer():\n    n = 1\n    def inner():\n        return n\n    return inner\n"
            "runtime.save_workflow(outer())",
            "ValueError",
            "variables of the function around it",
        ),
        (
            "def outer():\n    def inner():\n        return 1\n    return inner\n"
            "runtime.save_workflow(outer())",
            "ValueError",
            "inside another function",
        ),
        (
            "class C:\n    def m(self):\n        return 1\nruntime.save_workflow(C().m)",
            "TypeError",
            "not a method",
        ),
        (
            "class C:\n    def m(self):\n        return 1\nruntime.save_workflow(C.m)",
            "ValueError",
            "in a class",
        ),
        (
            "import json\ndef f():\n    return json.dumps(helper())\nruntime.save_workflow(f)",
            "ValueError",
            "helper, json",
        ),
        (
            "import functools\n@functools.cache\ndef f():\n    return 1\nruntime.save_workflow(f)",
            "TypeError",
            "not _lru_cache_wrapper",
        ),
        ("def f():\n    return 1\nruntime.save_workflow(f, name=3)", "TypeError", "name"),
        ("runtime.save_workflow('f')", "TypeError", "str"),
    ],
)
def test_what_cannot_be_a_workflow_is_refused_naming_why(
    host: FakeHost, code: str, kind: str, says: str
) -> None:
    Kept(host)
    got_kind, message = error(host, code)
    assert (got_kind, says in message) == (kind, True), message
    assert not [r for r in host.requests if r.method == "save_workflow"]


def test_a_decorated_function_is_refused(host: FakeHost) -> None:
    Kept(host)
    code = "def deco(f):\n    return f\n@deco\ndef g():\n    return 1\nruntime.save_workflow(g)"
    kind, message = error(host, code)
    assert kind == "ValueError"
    assert "decorators" in message


def test_an_unknown_workflow_raises_the_hosts_error(host: FakeHost) -> None:
    Kept(host)
    kind, message = error(host, "runtime.workflow('nope')")
    assert kind == "mcp.UnknownTool"
    assert "nope" in message


def test_the_runtime_module_lists_the_workflow_helpers(host: FakeHost) -> None:
    names = ok(host, "sorted(n for n in runtime.__all__ if 'workflow' in n)")
    assert names == (
        "['delete_workflow', 'list_workflows', 'save_workflow', 'search_workflows', 'workflow']"
    )
    assert not [r for r in host.requests if isinstance(r, Request)]
