"""The capability-summary resource and the worked-example prompt (static text, no server names)."""

from __future__ import annotations

__all__ = [
    "CAPABILITIES_URI",
    "CAPABILITIES_TEXT",
    "WORKFLOW_PROMPT_NAME",
    "WORKFLOW_PROMPT_DESCRIPTION",
    "WORKFLOW_PROMPT_TEXT",
]

CAPABILITIES_URI = "mcp-code-execution-mode://capabilities"

CAPABILITIES_TEXT = """\
# run_python: what the sandbox offers

One tool, `run_python`, runs Python 3 in a hardened container: no network, read-only root,
writable `/tmp` only, no capabilities, memory/process/CPU limits. Top-level `await` works.

## Arguments

- `code`: Python source. The value of the last expression is returned.
- `timeout` (seconds, optional): capped by the bridge's maximum.
- `session` (optional name): variables, imports and open objects persist per session. A new
  name creates that session; absent means the default session.
- `reset` (optional bool): start the session from a fresh namespace.
- `yield_after` (seconds, optional): if the code still runs then, return its output so far and a
  `run_id` (`structuredContent.state == "running"`); the code goes on.
- `resume` (a `run_id`, instead of `code`): what the run printed since, or its final result
  (`state == "done"`); with `yield_after` it yields again. `cancel` (a `run_id`) stops it.

## Your other MCP servers, from inside the code

```python
from mcp import runtime, mcp_servers
await runtime.discovered_servers()            # names; detailed=True adds descriptions
await runtime.search_tool_docs("query", limit=5)   # fuzzy search across every server
await runtime.query_tool_docs("server")       # schemas of one server, only when needed
await mcp_servers["server"].tool(arg=...)     # call a tool
from mcp import mcp_server_name               # attribute style
from mcp.servers.server_name import tool      # module style
runtime.progress(done, total, "message")      # progress notifications to the client
runtime.save_workflow(fn)                     # keep a def; runtime.workflow(name) in later sessions
```

Tool results come back as Python values (the text or structured content of the tool).
A failing tool raises an exception you can catch and retry. Before a cell runs, its nested
calls written with literal names are checked against the tools' schemas: a wrong server, tool,
argument or result key stops the whole cell (`[error] CheckFailed: line N: … did you mean …`)
before any line runs, so fix the call and run the cell again.

## Results

First what the code produced: stdout exactly, stderr marked `[stderr]`, the last expression's
value, the trimmed traceback on error; control characters show as escapes (`\\x1b`). Then, only
when there is something to say, the bridge's own block: the status (`[error] …`, `[timeout] …`)
and `[notice]` lines; the code's output never appears there. Images saved or displayed by the
code arrive as images. Long output keeps its head and tail; the full text stays in the session,
read-only, at the path named in the notice.
"""

WORKFLOW_PROMPT_NAME = "discovery-first-workflow"
WORKFLOW_PROMPT_DESCRIPTION = (
    "A worked example: discover servers, search tools, call them in a loop."
)

WORKFLOW_PROMPT_TEXT = """\
Use the run_python tool and work discovery-first. A worked example:

1. See which servers exist:

```python
from mcp import runtime
await runtime.discovered_servers()
```

2. Find the tool you need without loading every schema:

```python
hits = await runtime.search_tool_docs("read a file", limit=5)
hits
```

3. Read the schema of the server that has it:

```python
docs = await runtime.query_tool_docs(hits[0]["server"])
[t["name"] for t in docs["tools"]]
```

4. Call tools in plain Python, looping and filtering before printing:

```python
from mcp import mcp_servers
fs = mcp_servers[hits[0]["server"]]
sizes = {}
for name in ["a.txt", "b.txt"]:
    text = await fs.read_text_file(path=f"/data/{name}")
    sizes[name] = len(text)
sizes
```

5. Variables persist: a later call can use `sizes` directly.
"""
