"""History in SQL: every transition the model decides kept as intervals, and audits over months.

    reactor ──▶ HistorySink ──▶ Outbox ──▶ HistoryWriter ──▶ SQL (SQLite file / PostgreSQL)
    (Changes)   (encode, append)  (queue or    (batches, one         ▲
                                   Redis stream) transaction each)   │
                                                         HistoryQueries ◀── schema/history.py

* `models` — the tables (SQLAlchemy 2 `Mapped[]` models); `migrations/` owns the schema.
* `outbox` — the durable-enough queue between the reactor and SQL (a Protocol; in-process here).
* `recording` — how one batch of outbox entries becomes rows (idempotent interval logic).
* `writer` — the sink the reactor calls and the task that drains the outbox, retrying outages.
* `queries` / `contention` — the audit reads; `export` — the CSV endpoint.
* `migrate` — `await migrate(url)`: Alembic upgrade to head (`dra-mirror migrate`).

Times are stored as integer microseconds since the Unix epoch (UTC): exact, dialect-neutral
arithmetic for durations and overlaps; `times` converts to and from RFC 3339.
"""
