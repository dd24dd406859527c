"""Direct resolvers answer exactly what strawberry's resolver pipeline answers."""

from __future__ import annotations

import strawberry
from strawberry.schema.config import StrawberryConfig
from strawberry.tools import merge_types

from dra_mirror.schema import ROOT_QUERIES, build_schema
from dra_mirror.schema.context import make_context
from dra_mirror.schema.execution import PLAIN_LEAF
from dra_mirror.schema.live import Subscription
from dra_mirror.schema.resolvers import direct_resolvers
from dra_mirror.schema.scalars import SCALAR_MAP
from dra_mirror.service.stores.memory import MemoryStore

from .conftest import QUERIED_AT

# Most types and fields of the graph, plain ones and ones taking `info`.
EVERYTHING = """{
  clusters { name status { connected synced lastEventAt error apiVersion lastSyncAt events relists malformed } counts { devices freeDevices claims pendingClaims } }
  deviceClasses { cluster name selectors extendedResourceName devices { name } }
  resourceSlices { cluster name driver nodeName allNodes pool { name generation resourceSliceCount complete }
                   node { name } devices { name uuid } }
  devices(first: 5) { totalCount pageInfo { hasNextPage endCursor } edges { cursor node {
    cluster driver pool name uuid attributes shareable nodeName consumesCounters status taints
    capacity { name value } remainingCapacity { name value }
    allocations { request shareID consumedCapacity adminAccess claim { name } device { name } }
    slice { name } node { name } classes { name } pods { name } } } }
  resourceClaims(first: 5) { totalCount edges { node {
    cluster namespace name uid state origin templateName idle idleSince createdAt pendingSeconds
    template { name requests { name } } requests { name deviceClassName allocationMode count selectors
      adminAccess capacity tolerations firstAvailable { name deviceClassName } }
    allocation { nodeName allocatedAt node { name } devices { request shareID device { name } } }
    consumers { name phase } } } }
  resourceClaimTemplates { cluster namespace name requests { name } claims { name } }
  pods(first: 5) { edges { node { cluster namespace name uid phase reason nodeName createdAt node { name }
    claims { name claim { name } templateName containers } devices { name } } } }
  nodes { cluster name labels ready unschedulable allocatable capacity slices { name } devices { name } pods { name } }
  whoHolds(device: "gpu-0") { cluster request shareID consumedCapacity since device { name }
    claim { name } pods { name } }
}"""


def plain_schema() -> strawberry.Schema:
    """The graph as strawberry resolves it, without `direct_resolvers`."""
    return strawberry.Schema(
        query=merge_types("Query", ROOT_QUERIES),
        subscription=Subscription,
        config=StrawberryConfig(scalar_map=SCALAR_MAP),
    )


async def test_direct_resolvers_answer_as_strawberry_does(world_store: MemoryStore) -> None:
    direct, plain = build_schema(), plain_schema()
    answers = []
    for schema in (direct, plain):
        context = make_context(world_store, now=lambda: QUERIED_AT)
        result = await schema.execute(EVERYTHING, context_value=context)
        assert not result.errors, result.errors
        answers.append(result.data)
    assert answers[0] == answers[1]
    assert answers[0]["devices"]["edges"] and answers[0]["whoHolds"]


def test_only_fields_whose_arguments_need_no_conversion_are_made_direct() -> None:
    schema = plain_schema()
    query = schema._schema.query_type
    claim = schema._schema.type_map["ResourceClaim"]
    fields = (query.fields["contention"], query.fields["whoHolds"], claim.fields["name"])
    before = [field.resolve for field in fields]
    assert direct_resolvers(schema) > 50
    # DateTime and enum arguments are converted by strawberry: its resolver stays
    assert query.fields["contention"].resolve is before[0]
    assert query.fields["whoHolds"].resolve is not before[1]  # String arguments
    assert claim.fields["name"].resolve is not before[2]
    assert PLAIN_LEAF in claim.fields["name"].extensions  # a plain method of a scalar type
    assert PLAIN_LEAF not in query.fields["whoHolds"].extensions
