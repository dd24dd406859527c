"""The only way resolvers reach the state store: scoped, batched, with errors translated once.

`ScopedReader` is the questions' scoped reader (`service.questions.scoped`: every list and
lookup drops what the request's access `Scope` does not allow; a record the scope hides reads
as `None`, exactly like one that does not exist), with one difference: `StoreUnavailable`
from the backend becomes `StateStoreUnavailable`, a GraphQL error whose message says "state
store unavailable" — clients see a clear error, never an HTTP 500.

It keeps the store's batched shape (`get(keys)`, `lookup(relation, keys)`…) so that the
per-request DataLoaders in `schema.loaders` make one store call per relation and batch, and is
itself a `StateReader` (and the questions' `ScopedState`): its live events are filtered by
the caller (`schema.live`), and the in-process index it passes on (`index(cluster)`) is read
by the questions with the scope applied per namespace (`service.questions.cluster_state`).
"""

from __future__ import annotations

from graphql import GraphQLError

from dra_mirror.service.questions import scoped
from dra_mirror.service.questions.scoped import ReadScope, Scope
from dra_mirror.service.stores.protocols import StoreUnavailable

__all__ = ["ReadScope", "Scope", "ScopedReader", "StateStoreUnavailable"]


class StateStoreUnavailable(GraphQLError):
    """The state store (Redis) cannot be reached: the answer would be incomplete, so none."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(
            f"state store unavailable: {cause}",
            extensions={"code": "STATE_STORE_UNAVAILABLE"},
        )


class ScopedReader(scoped.ScopedReader):
    """A `StateReader` seen through a `Scope`, raising only `StateStoreUnavailable`."""

    def unavailable(self, error: StoreUnavailable) -> Exception:
        return StateStoreUnavailable(error)
