"""The fixed GraphQL documents the questions send from another process, named, in one list.

A server that runs only registered documents (`DRA_MIRROR_GRAPHQL_REFUSE_UNREGISTERED`)
registers these as its own (`service.http.registered`), so the command line's questions
(`dra-mirror who-holds|free|waiting|idle|lint|explain|plan --server`) and `dra-mirror mcp` keep
working against it: `service.questions.remote.DOCUMENTS`. Documents built per request are not
here and are refused by such a server: `explain` without a cluster (one aliased field per
mirrored cluster). In the mirror's own process (Slack, `/mcp`) no document is sent at all.
"""

from __future__ import annotations

from .remote import DOCUMENTS

QUESTION_DOCUMENTS: tuple[tuple[str, str], ...] = DOCUMENTS
