"""The HTTP edge: the Starlette app and the endpoints beside GraphQL.

* `app`      — the app factory: `/graphql`, `/healthz`, `/readyz`, and the routes below;
* `exports`  — the history audits as CSV (`/export/*.csv`);
* `metrics`, `metrics_collectors`, `metrics_dra` — `/metrics` in Prometheus text.
"""
