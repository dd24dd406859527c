"""Every resolver of the graph takes the typed `Info` (`schema.context.Info`, strawberry's
`Info` bound to the request's `Context`), so that what it reads from the store is typed: a
resolver taking a bare `strawberry.Info` would read `info.context` as `Any`."""

from __future__ import annotations

import typing

from dra_mirror.schema import build_schema
from dra_mirror.schema.context import Context, Info


def _resolvers_taking_info() -> dict[str, object]:
    schema = build_schema()
    found: dict[str, object] = {}
    for type_name, concrete in schema.schema_converter.type_map.items():
        for field in getattr(getattr(concrete, "definition", None), "fields", None) or ():
            resolver = field.base_resolver
            if resolver is None or resolver.info_parameter is None:
                continue
            hints = typing.get_type_hints(resolver.wrapped_func, include_extras=True)
            found[f"{type_name}.{field.python_name}"] = hints[resolver.info_parameter.name]
    return found


def test_every_resolver_takes_the_typed_info():
    found = _resolvers_taking_info()
    assert len(found) > 60  # the graph's resolvers, subscriptions included
    assert "Subscription.claim_events" in found
    bare = {name: hint for name, hint in found.items() if hint != Info}
    assert bare == {}


def test_the_alias_binds_the_context():
    assert typing.get_args(Info) == (Context, type(None))
