"""The Redis key layout's encodings: the same bytes as the layout always had, right-sized.

Keys and members written by an earlier version must still be matched (a SREM removes exactly
what a SADD added), so the JSON encodings are compared with orjson's, which wrote them before;
and each encoding must hold no more memory than its text: an initial sync keeps some 300,000 of
them alive until its transaction is sent.
"""

from __future__ import annotations

import tracemalloc

import orjson

from dra_mirror.service.model.records import DeviceKey, ObjectKey
from dra_mirror.service.stores.redis_keys import (
    decode_device_key,
    decode_members,
    device_field,
    driver_prefix,
    encode_members,
    key_member,
    link_part,
)

NAMES = ["gpu-0", "pool/with/slashes", "ünïcode-池", 'quote"back\\slash', "tab\there", "\x01\x1f"]


def test_the_encodings_are_the_bytes_of_the_layout() -> None:
    for name in NAMES:
        key = DeviceKey("east", "gpu.example.com", name, name)
        assert device_field(key) == orjson.dumps(list(key[1:]))
        assert decode_device_key("east", device_field(key)) == key
        assert driver_prefix(name) == b"[" + orjson.dumps(name) + b","
        claim = ObjectKey("east", "ResourceClaim", "ns", name)
        assert key_member(claim) == orjson.dumps(list(claim[1:]))
        assert link_part(("east", name)) == orjson.dumps([name])
        assert link_part(name) == orjson.dumps(name)
        members = [claim, ObjectKey("east", "ResourceClaim", name, "b")]
        assert encode_members(members) == orjson.dumps([list(m[1:]) for m in members])
        assert decode_members("east", "class_claims", encode_members(members)) == members
    assert device_field(DeviceKey("east", "d", "p", "gpu-0")) == b'["d","p","gpu-0"]'


def test_an_encoding_holds_no_more_memory_than_its_text() -> None:
    keys = [DeviceKey("east", "gpu.example.com", f"node-{i}", f"gpu-{i % 8}") for i in range(2000)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        encoded = [device_field(key) for key in keys] + [key_member(key) for key in keys]
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    text = sum(len(raw) for raw in encoded)
    # a bytes object's header is ~33 bytes; 4 KiB buffers (orjson 3.12+) would be ~8 MiB here
    assert held < text + 80 * len(encoded), (held, text)
