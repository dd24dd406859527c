"""Tools for agents: the mirror's questions as Model Context Protocol tools (the `mcp` SDK).

* `tools`   — the tools (who holds, free devices, waiting claims, idle holders, capacity, a
  pod's devices, why pending, plan, lint, device and claim history, contention), each a
  question of `service.questions` asked of a `Questions`, with answers cut small for a model;
* `results` — the tools' typed, documented results (their output schemas);
* `server`  — `build_server(questions_for)`: an `MCPServer` with those tools, whatever the
  transport;
* `http`    — `/mcp` on the app (streamable HTTP, stateless): each call asks the questions in
  the app's own process with the HTTP request's asker, so the bearer token passes the same
  access gate and scope as `/graphql`.

`dra-mirror mcp` (service/cli/mcp.py) serves the same tools over stdio for local use, asking a
running mirror's `/graphql` with the user's token (`RemoteQuestions`).
"""
