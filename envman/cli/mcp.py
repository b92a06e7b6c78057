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
        from mcp_types import jsonrpc_message_adapter

        from envman.cli.mcpserver import build_server
        from envman.cli.mcpwire import serve_stdio

        def is_message(text: str) -> bool:
            try:
                jsonrpc_message_adapter.validate_json(text, by_name=False)
            except ValueError:  # pydantic's ValidationError is a ValueError
                return False
            return True

        serve_stdio(lambda: build_server().run("stdio"), is_message)
