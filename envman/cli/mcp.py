"""``envman mcp``: a Model Context Protocol server over stdio, so that a coding agent can ask envman before it
runs ``pip install``. The server and its tools are in cli/mcpserver.py, imported only when this command runs:
the MCP SDK is an extra (``pip install 'envman[mcp]'``) that brings pydantic, starlette and anyio, which no
other command needs.
"""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command("mcp")
    def mcp_cmd() -> None:
        """Serve envman's questions to coding agents (Model Context Protocol over stdio; docs/mcp.md)."""
        try:
            import mcp  # noqa: F401
        except ImportError:
            from envman.errors import UsageError

            raise UsageError("envman mcp needs the MCP Python SDK, which is not installed",
                             hint="pip install 'envman[mcp]'") from None
        from envman.cli.mcpserver import build_server

        build_server().run("stdio")
