"""The HTTP edge: the Starlette app and the endpoints beside GraphQL.

* `app`      — the app factory: `/graphql`, `/healthz`, `/readyz`, and the routes below,
  around the stores, history and watchers it is handed (`watchers`: what it needs of them;
  `service.runtime` builds them);
* `exports`  — the history audits as CSV (`/export/*.csv`);
* `metrics`, `metrics_collectors`, `metrics_dra` — `/metrics` in Prometheus text.
"""
