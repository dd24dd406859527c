"""NVIDIA ConsumableShares: a GPU published so that many claims can share it.

With the driver's `ConsumableShares` feature gate and `--consumable-shares` set, every whole GPU
and static MIG device becomes shareable (`allowMultipleAllocations: true`) and its `memory`
capacity gets a `requestPolicy` in steps of 1Mi, its value rounded down to a whole MiB
(kubernetes-sigs/dra-driver-nvidia-gpu `cmd/gpu-kubelet-plugin/consumable_shares.go`,
`applyConsumableShares`; fixtures SOURCES.md). The option chooses the policy:

    memory     default the whole memory, validRange 1Mi .. memory: a claim that names no
               memory takes the whole GPU; one that does takes what it names, rounded up
    unlimited  default 0, validRange 0 .. memory: a claim that names no memory consumes none,
               so any number of claims share the GPU
    N (> 0)    as unlimited for memory, plus a `shares` capacity of N (default 1, validRange
               1 .. N step 1): at most N claims that name no shares

`disabled` (the driver's default) publishes the device unchanged. `SHARE_OPTIONS` is checked
by the scenario file.

Promises: pure; returns a new device dict, the input untouched.
"""

from __future__ import annotations

import copy

from dra_mirror.service.model.quantity import parse_quantity

__all__ = ["SHARE_OPTIONS", "apply_shares", "valid_option"]

SHARE_OPTIONS = ("disabled", "memory", "unlimited")  # or a positive integer
MIB = 1 << 20


def valid_option(option: str) -> bool:
    """Whether the driver's `--consumable-shares` accepts `option`."""
    return option in SHARE_OPTIONS or (option.isdigit() and int(option) > 0)


def _range(low: str, high: str, step: str) -> dict[str, str]:
    return {"min": low, "max": high, "step": step}


def apply_shares(device: dict, option: str | None) -> dict:
    """The device as the driver publishes it under `--consumable-shares=option`."""
    if option in (None, "", "disabled"):
        return device
    if not valid_option(str(option)):
        raise ValueError(f"consumable shares: {option!r} is not disabled, memory, unlimited or N>0")
    out = copy.deepcopy(device)
    out["allowMultipleAllocations"] = True
    capacity = out.setdefault("capacity", {})
    memory = capacity.get("memory")
    if memory is None:
        return out
    mib = int(parse_quantity(memory["value"])) // MIB
    whole = f"{mib}Mi"
    memory["value"] = whole
    if option == "memory":
        memory["requestPolicy"] = {"default": whole, "validRange": _range("1Mi", whole, "1Mi")}
        return out
    memory["requestPolicy"] = {"default": "0", "validRange": _range("0", whole, "1Mi")}
    if option != "unlimited":
        shares = str(int(str(option)))
        capacity["shares"] = {
            "value": shares,
            "requestPolicy": {"default": "1", "validRange": _range("1", shares, "1")},
        }
    return out
