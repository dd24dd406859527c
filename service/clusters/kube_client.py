"""The parts of kubernetes_asyncio the mirror uses, loaded without the generated API and models.

The mirror talks to clusters through `ApiClient.call_api` with `_preload_content=False` (bodies
stay raw bytes) and configures it with the client's own kubeconfig loader (exec plugins, token
refresh, OIDC, client certificates, TLS) or in-cluster loader. Yet `import
kubernetes_asyncio.client.api_client` runs `kubernetes_asyncio/__init__.py`,
`kubernetes_asyncio/client/__init__.py` and `kubernetes_asyncio/client/models/__init__.py`,
which import every generated API and model module: ~860 modules, ~35 MiB and a few tenths of a
second of every start, for classes the mirror never builds.

Importing this module first registers those three packages in `sys.modules` as package modules
whose `__init__` has not run yet (their own spec and `__path__`, so submodules import as
usual), then imports only `configuration`, `exceptions`, `rest`, `api_client` and the
configuration loaders, and sets the names they take from `kubernetes_asyncio.client` on it.
The first time anything asks one of those packages for another name (`from
kubernetes_asyncio.client import CoreV1Api`, `client.V1Pod`, `ApiClient.deserialize` of a
model), the package's real `__init__` runs into the same module, so every name the client
offers is still there for whoever asks, later, in any order. A name that is a submodule is
imported as that submodule. Idempotent; when kubernetes_asyncio is already imported the usual
way, nothing is registered and the same names are simply imported.

Every module of the mirror takes kubernetes_asyncio's names from here.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from types import ModuleType
from typing import Any

# The packages whose __init__ imports the generated code, parents first.
DEFERRED_PACKAGES = (
    "kubernetes_asyncio",
    "kubernetes_asyncio.client",
    "kubernetes_asyncio.client.models",
)
# Dunder names the packages' own __init__ defines; other dunders (probes such as
# `__warningregistry__` or `__wrapped__`) do not run it.
_OWN_DUNDERS = frozenset({"__all__", "__version__", "__project__"})
# The exceptions client/__init__.py binds.
_EXCEPTIONS = (
    "OpenApiException",
    "ApiTypeError",
    "ApiValueError",
    "ApiKeyError",
    "ApiAttributeError",
    "ApiException",
)
_lock = threading.RLock()


def _deferred_package(name: str) -> ModuleType:
    """A package module for `name`, registered in sys.modules, its `__init__` not yet run."""
    spec = importlib.util.find_spec(name)  # the parent is registered already
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        raise ImportError(f"{name} is not an installed package", name=name)
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def __getattr__(attribute: str) -> Any:  # the module's own (PEP 562)
        if attribute.startswith("__") and attribute not in _OWN_DUNDERS:
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}")
        if attribute.isidentifier() and importlib.util.find_spec(f"{name}.{attribute}"):
            return importlib.import_module(f"{name}.{attribute}")  # a submodule
        with _lock:
            if module.__dict__.get("__getattr__") is __getattr__:  # not run by another thread
                del module.__dict__["__getattr__"]
                try:
                    loader.exec_module(module)  # the real __init__, into this same module
                except BaseException:
                    module.__dict__["__getattr__"] = __getattr__
                    raise
        return _attribute(module, attribute)

    module.__dict__["__getattr__"] = __getattr__
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)
    return module


def _attribute(module: ModuleType, attribute: str) -> Any:
    try:
        return module.__dict__[attribute]
    except KeyError:
        raise AttributeError(f"module {module.__name__!r} has no attribute {attribute!r}") from None


def defer_generated_code() -> None:
    """Register the packages of `DEFERRED_PACKAGES` not imported yet as deferred packages, and
    set on `kubernetes_asyncio.client` the names its loaders take from it."""
    with _lock:
        if DEFERRED_PACKAGES[0] in sys.modules:
            return  # imported already, deferred or in full: the names import as usual
        for name in DEFERRED_PACKAGES:
            _deferred_package(name)
        from kubernetes_asyncio.client import exceptions
        from kubernetes_asyncio.client.api_client import ApiClient
        from kubernetes_asyncio.client.configuration import Configuration

        package = sys.modules["kubernetes_asyncio.client"]
        # What the real client/__init__.py binds from these modules (the same objects).
        bound = {"ApiClient": ApiClient, "Configuration": Configuration}
        bound.update((error, getattr(exceptions, error)) for error in _EXCEPTIONS)
        for attribute, value in bound.items():
            setattr(package, attribute, value)


defer_generated_code()

from kubernetes_asyncio.client.api_client import ApiClient  # noqa: E402
from kubernetes_asyncio.client.configuration import Configuration  # noqa: E402
from kubernetes_asyncio.client.exceptions import ApiException  # noqa: E402
from kubernetes_asyncio.client.rest import RESTClientObject  # noqa: E402
from kubernetes_asyncio.config.config_exception import ConfigException  # noqa: E402
from kubernetes_asyncio.config.incluster_config import load_incluster_config  # noqa: E402
from kubernetes_asyncio.config.kube_config import (  # noqa: E402
    KubeConfigLoader,
    load_kube_config,
)

__all__ = [
    "ApiClient",
    "ApiException",
    "ConfigException",
    "Configuration",
    "KubeConfigLoader",
    "RESTClientObject",
    "defer_generated_code",
    "load_incluster_config",
    "load_kube_config",
]
