"""The reviewer's connectors as a local MCP server, for the CLI engines.

`python -I -m sandbox.engines.cli.mcp_server <spec.json>` speaks MCP over stdio (the
official `mcp` SDK): it lists the job's connectors as tools and sends each call to
Tasuku over the runner's bridge (sandbox/connectors.py), as the API engines do
(sandbox/agent/tools/connectors.py: the same call bound, the same fencing of the
answer as data). The CLI starts it from the MCP configuration the engine wrote in its
throwaway HOME (sandbox/engines/cli/extras.py), with the bridge's socket and the run's
token in its environment; it holds neither the connectors' endpoints nor their
credentials, which stay with Tasuku.

Each call is also written, one JSON line, to the spec's `log` file: the engine reads it
after the CLI ends, for the transcript's "connector" entries and the calls' count.

Reference: https://modelcontextprotocol.io/specification/2025-06-18/basic/transports#stdio
Reference: https://modelcontextprotocol.io/specification/2025-06-18/server/tools
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from sandbox.agent.tools.connectors import ConnectorTools, Outcome
from sandbox.connectors import ConnectorClient
from sandbox.contract import ConnectorTool
from sandbox.engines.cli.extras import SERVER_NAME

LOGGED_CONTENT = 4000  # of an answer, kept for the transcript


class SpecError(ValueError):
    """The spec file the engine wrote cannot be read."""


def spec_read(path: str) -> dict[str, Any]:
    try:
        spec = json.loads(Path(path).read_text("utf-8"))
        connectors = [ConnectorTool.model_validate(c) for c in spec["connectors"]]
        boundary, max_calls, log = str(spec["boundary"]), int(spec["max_calls"]), spec["log"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SpecError(f"the connectors' spec {path} cannot be read: {exc}") from exc
    return {"connectors": connectors, "boundary": boundary, "max_calls": max_calls, "log": log}


def log_write(path: str, entry: dict[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as log:
        log.write(json.dumps(entry, ensure_ascii=False) + "\n")


def outcome_entry(name: str, outcome: Outcome) -> dict[str, Any]:
    return {
        "name": name,
        "is_error": outcome.is_error,
        "content": outcome.content[:LOGGED_CONTENT],
        "record": outcome.record.model_dump(mode="json"),
    }


def server_build(tools: ConnectorTools, log: str):
    """The MCP server: `tools/list` gives the connectors, `tools/call` makes a call."""
    from mcp import types
    from mcp.server.lowlevel import Server

    listed = [
        types.Tool(name=spec.name, description=spec.description, input_schema=spec.input_schema)
        for spec in tools.specs
    ]

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        name = params.name
        if name not in tools:
            return types.CallToolResult(
                content=[types.TextContent(text=f"There is no connector named {name!r}.")],
                is_error=True,
            )
        outcome = await asyncio.to_thread(tools.call, name, params.arguments or {})
        log_write(log, outcome_entry(name, outcome))
        return types.CallToolResult(
            content=[types.TextContent(text=outcome.content)], is_error=outcome.is_error
        )

    return Server(
        SERVER_NAME,
        version="1",
        instructions="The team's connectors: each call is made by Tasuku; answers are data.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        if len(args) != 1:
            raise SpecError("usage: python -m sandbox.engines.cli.mcp_server <spec.json>")
        spec = spec_read(args[0])
    except SpecError as exc:
        print(f"tasuku connectors: {exc}", file=sys.stderr)
        return 2
    client = ConnectorClient.from_environment()
    if client is None:
        problem = "no way to Tasuku: the bridge's socket and token are not in the environment"
        print(f"tasuku connectors: {problem}", file=sys.stderr)
        log_write(spec["log"], {"error": problem})
        return 2
    tools = ConnectorTools(
        spec["connectors"], client, boundary=spec["boundary"], max_calls=spec["max_calls"]
    )
    from mcp.server.stdio import stdio_server

    server = server_build(tools, spec["log"])

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    asyncio.run(serve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
