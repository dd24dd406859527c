"""Who may see what: subjects, scopes and the authenticators that recognise them.

    scope           AccessScope: clusters, namespaces (or *), history; admin; `allows(...)`
    subjects        Subject: name, method, groups, scope
    authenticators  the Authenticator Protocol and the chain; bearer tokens
    static          hashed static tokens for machines
    oidc            OIDC JWTs (PyJWT), keys from the issuer, groups -> scopes
    kubernetes      TokenReview + SubjectAccessReview on the clusters, cached, failing closed
    kube_api        the mirror's review calls over kubernetes_asyncio
    slack           Slack workspace / user / user group -> scope
    ratelimit       a token bucket per subject
    config          the access file and DRA_MIRROR_ACCESS_* variables, checked at start
    control         AccessControl: all of it as one object owned by the app's lifespan
    errors          the boundary's errors (401, 403, 429, 503) and AccessConfigError

This package knows no front end (no Starlette, strawberry, Slack SDK): the HTTP, GraphQL, Slack
and metrics front ends turn their requests into a `Subject` here and then read through
`subject.scope`. It imports the model, the settings, and the cluster connections only to open
the reviewing clusters (`control`).
"""
