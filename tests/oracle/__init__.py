"""An independent reading of the DRA API, and the tests that hold the mirror to it.

`truth.answer(objects)` is a deliberately naive function from the raw API objects of one
cluster (plain dicts, any served version) to the answers a user asks for; it imports nothing
of `dra_mirror`. `system` is the one adapter that drives the real mirror (index, stores,
GraphQL, history) and reads its answers back; `compare` diffs the two and `known` names the
disagreements that are known defects (each with a strict xfail test that flips when fixed).
"""
