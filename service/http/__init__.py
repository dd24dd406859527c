"""The HTTP edge: the Starlette app, its routes and middleware, and GraphQL over HTTP.

* `app`      — `create_app(state, endpoints, lifespan)`: routes and middleware around what
  the composition root (`service.runtime`) built, run by the lifespan it is given;
* `state`    — `AppState`, what the routes share (`/readyz`'s answer, the metrics, the
  scope of each request), and `watchers`, what it needs of the watchers it is handed;
* `graphql`, `graphql_http`, `graphql_requests`, `graphql_route`, `documents`, `shapes`,
  `persisted`, `registered`, `live_frames` — `/graphql`: strawberry's view with a short path
  for queries, persisted and registered documents, WebSocket subscriptions;
* `guard`, `access` — every request's budget, and who asks (the access gate);
* `exports`  — the history audits as CSV (`/export/*.csv`);
* `metrics`, `metrics_collectors`, `metrics_dra`, `metrics_dra_text`, `metrics_scope` —
  `/metrics` in Prometheus text.

http hosts the schema (its view executes it); it imports no other front end.
"""
