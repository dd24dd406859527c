"""Tools for agents: the mirror's questions as Model Context Protocol tools (the `mcp` SDK).

* `tools`  — the tools (who holds, free devices matching a selector, why pending, plan, device
  and claim history, contention), each a question of `service.questions` asked of the graph
  through an `Ask`, with answers cut small and structured for a model;
* `server` — `build_server(ask_for)`: an `MCPServer` with those tools, whatever the transport;
* `http`   — `/mcp` on the app (streamable HTTP, stateless): each call asks the app's own
  schema in-process with the HTTP request's context, so the bearer token passes the same
  access gate and scope as `/graphql`.

`dra-mirror mcp` (service/cli/mcp.py) serves the same tools over stdio for local use, asking a
running mirror's `/graphql` with the user's token.
"""
