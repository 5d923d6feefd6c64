"""``python -m mcp_code_execution_mode``: the MCP server (same as ``mcp-code-execution-mode``)."""

from mcp_code_execution_mode.cli import main

raise SystemExit(main())
