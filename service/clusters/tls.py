"""The TLS context of a cluster's connection: built only for an https server, once per settings.

kubernetes_asyncio's REST client builds an `ssl.SSLContext` for every `ApiClient`, loading the
system's CA store (~20 ms of CPU each) even when the server is plain `http://` and the context
is never used. `TlsContexts().context_for(configuration)` gives None for a server that is not
`https://`, and for an https one the context the client would build — the kubeconfig's CA (file or data, which
the kubeconfig loader writes to a file) or else the system's CA store, its client certificate
and key, `insecure-skip-tls-verify` (no hostname check, no verification), the client's
`disable_strict_ssl_verification` — kept per process for those settings, so the contexts of
one cluster (several users, several contexts) share one. A file's path, size and modification
time are part of the key: a certificate rewritten on disk gives a new context. One
`TlsContexts` serves the connections made together (`service.clusters.config.connect`). `tls-server-name`
is not part of the context: the client sends it with each request (`server_hostname`).

Promise: for an https server, the context verifies and presents exactly what the client's
own would (`tests/clusters` authenticate over TLS with a CA and a client certificate).
"""

from __future__ import annotations

import os
import ssl
import threading

from dra_mirror.service.clusters.kube_client import Configuration


def _file_key(path: str | None) -> tuple[object, ...] | None:
    if not path:
        return None
    try:
        status = os.stat(path)
    except OSError:
        return (path,)  # loading it fails below, as the client's own would
    return (path, status.st_size, status.st_mtime_ns)


def uses_tls(configuration: Configuration) -> bool:
    """Whether the configuration's server is reached over TLS (an `https://` URL)."""
    return str(configuration.host or "").lower().startswith("https://")


def _build(configuration: Configuration) -> ssl.SSLContext:
    """What kubernetes_asyncio's `RESTClientObject` builds, step by step."""
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, keyfile=configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if configuration.disable_strict_ssl_verification:
        context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    return context


class TlsContexts:
    """The TLS contexts of connections made together, one per set of TLS settings."""

    def __init__(self) -> None:
        self._contexts: dict[tuple[object, ...], ssl.SSLContext] = {}
        self._lock = threading.Lock()

    def context_for(self, configuration: Configuration) -> ssl.SSLContext | None:
        """The connection's TLS context (see the module docstring); None without TLS."""
        if not uses_tls(configuration):
            return None
        key = (
            _file_key(configuration.ssl_ca_cert),
            _file_key(configuration.cert_file),
            _file_key(configuration.key_file),
            bool(configuration.verify_ssl),
            bool(configuration.disable_strict_ssl_verification),
        )
        with self._lock:
            context = self._contexts.get(key)
            if context is None:
                context = self._contexts[key] = _build(configuration)
        return context
