"""The names of the kinds dra-mirror knows and of their API groups, as Kubernetes spells them.

Only names: what each kind is and how it is served, read and indexed is registered once in
`service.model.kinds`. The names live apart so that the records, which the registry points
to, can name kinds without importing it.

Promises: constants only, no imports from the package.
"""

from __future__ import annotations

from typing import Final

DRA_GROUP: Final = "resource.k8s.io"
CORE_GROUP: Final = ""

# Kinds, as Kubernetes spells them (Final: type checkers read them as literals, so a call such
# as `normalize(RESOURCE_CLAIM, …)` is known to give a ClaimRecord).
DEVICE_CLASS: Final = "DeviceClass"
RESOURCE_SLICE: Final = "ResourceSlice"
RESOURCE_CLAIM: Final = "ResourceClaim"
RESOURCE_CLAIM_TEMPLATE: Final = "ResourceClaimTemplate"
POD: Final = "Pod"
NODE: Final = "Node"
NAMESPACE: Final = "Namespace"
DEVICE_TAINT_RULE: Final = "DeviceTaintRule"
POD_GROUP: Final = "PodGroup"
RESOURCE_POOL_STATUS_REQUEST: Final = "ResourcePoolStatusRequest"

# PodGroup's group (KEP-5729: v1alpha2 in 1.36, v1beta1 and v1alpha3 in 1.37).
SCHEDULING_GROUP: Final = "scheduling.k8s.io"
