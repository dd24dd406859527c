"""The raw HTTP edge to one cluster: GET a body as bytes, or stream a watch line by line.

Requests go through kubernetes_asyncio's `ApiClient.call_api` with `_preload_content=False`, so
authentication (bearer tokens, client certificates, exec plugins and their refresh), TLS and
proxies are the client's, while bodies stay raw bytes: the generated model classes are never
built (they are slow and would tie the core to the client). Every failure leaves this module
as a `service.clusters.errors.ClusterError`; nothing else in the package touches aiohttp.

Watch streams are split into lines here rather than with aiohttp's `readline`, whose limit
(128 KiB) a ResourceSlice of 128 devices can exceed.

`api_client_for(configuration)` builds the `ApiClient` of a connection with a session that reads
nothing from the environment per request. The client's own session trusts the environment
(aiohttp's `trust_env`): for every request it looks the server's host up in ~/.netrc and the
proxy variables, each in a worker thread (~0.45 ms of CPU a request), and a netrc entry for
that host adds Basic credentials that clash with the kubeconfig's token (every request then
fails). Kubernetes clients take credentials from the kubeconfig alone, and a proxy from the
kubeconfig's `proxy-url` or else from HTTPS_PROXY / HTTP_PROXY / NO_PROXY: the environment's
proxy for the server (and its credentials, as aiohttp finds them) is read here, once. The
client's REST object is the mirror's (`MirrorRest`): it builds no TLS context for a plain
`http://` server and takes an https server's from `service.clusters.tls` (one per set of TLS
settings among the connections made together), the context the client's own would build.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

from dra_mirror.service.clusters.errors import ClusterError, from_status, translate
from dra_mirror.service.clusters.kube_client import ApiClient, Configuration, RESTClientObject
from dra_mirror.service.clusters.tls import TlsContexts

# kubernetes_asyncio's own session reads up to this much of a response at once (large watch
# events).
_READ_BUFFER = 2**21

Query = Mapping[str, str | int | bool]


def _query(params: Query) -> list[tuple[str, str]]:
    # Kubernetes expects lower-case booleans; urlencode would send "True".
    return [
        (k, ("true" if v else "false") if isinstance(v, bool) else str(v))
        for k, v in params.items()
    ]


class MirrorRest(RESTClientObject):
    """The client's REST object, its session not trusting the environment and its TLS context
    built only for an https server (the client's own `request` sends every call)."""

    def __init__(self, configuration: Configuration, *, tls: TlsContexts) -> None:
        # Not the client's __init__: that one builds a TLS context whatever the server.
        # (the client's stubs type these without None; its own __init__ sets them so)
        self.server_hostname = configuration.tls_server_name  # type: ignore[assignment]
        self.proxy = configuration.proxy  # type: ignore[assignment]
        self.proxy_headers = configuration.proxy_headers  # type: ignore[assignment]
        context = tls.context_for(configuration)
        connector = aiohttp.TCPConnector(
            limit=configuration.connection_pool_maxsize,
            ssl=True if context is None else context,  # True: aiohttp's default, for https
        )
        self.pool_manager = aiohttp.ClientSession(
            connector=connector, trust_env=False, read_bufsize=_READ_BUFFER
        )


class MirrorApiClient(ApiClient):
    """kubernetes_asyncio's `ApiClient` over `MirrorRest` (its __init__, without building the
    client's own REST object: the same attributes, `tests/clusters` compares them)."""

    def __init__(self, configuration: Configuration, *, tls: TlsContexts) -> None:
        self.configuration = configuration
        self.pool_threads = 1
        self.rest_client = MirrorRest(configuration, tls=tls)
        self.default_headers: dict[str, str] = {}
        self.cookie = None  # type: ignore[assignment]
        self.user_agent = "OpenAPI-Generator/33.3.0+snapshot/python"  # the client's own
        self.client_side_validation = configuration.client_side_validation


def api_client_for(configuration: Configuration, *, tls: TlsContexts | None = None) -> ApiClient:
    """The ApiClient for `configuration`, its session not trusting the environment (see the
    module docstring), its TLS context from `tls` (connections made together share one);
    call it inside the event loop."""
    if not configuration.proxy and configuration.host:  # the kubeconfig's proxy-url wins
        try:
            proxy, proxy_auth = get_env_proxy_for_url(URL(configuration.host))
        except LookupError:  # no proxy variable for the scheme, or NO_PROXY names the host
            pass
        else:
            configuration.proxy = str(proxy)
            if proxy_auth is not None:
                configuration.proxy_headers = {"Proxy-Authorization": proxy_auth.encode()}
    return MirrorApiClient(configuration, tls=tls if tls is not None else TlsContexts())


class ClusterApi:
    """GET and watch one cluster through its `ApiClient`."""

    def __init__(self, cluster: str, api_client: ApiClient) -> None:
        self.cluster = cluster
        self.api_client = api_client

    async def _open(
        self, path: str, params: Query, limits: aiohttp.ClientTimeout
    ) -> aiohttp.ClientResponse:
        try:
            response = await self.api_client.call_api(
                path,
                "GET",
                query_params=_query(params),
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=limits,
            )
        except ClusterError:
            raise
        except Exception as error:  # foreign errors are translated here, once
            raise translate(error, cluster=self.cluster, path=path) from error
        if response.status >= 400:
            try:
                body = await response.read()
            except Exception:
                body = b""
            finally:
                response.release()
            raise from_status(
                response.status, body, response.headers, cluster=self.cluster, path=path
            )
        return response

    async def get(
        self, path: str, params: Query | None = None, *, time_limit: float = 60.0
    ) -> bytes:
        """The body of `GET path?params`; `time_limit` bounds the whole request (seconds)."""
        response = await self._open(path, params or {}, aiohttp.ClientTimeout(total=time_limit))
        try:
            return await response.read()
        except Exception as error:
            raise translate(error, cluster=self.cluster, path=path) from error
        finally:
            response.release()

    @asynccontextmanager
    async def stream(
        self, path: str, params: Query, *, time_limit: float, connect_limit: float = 10.0
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """Open a streaming GET (a watch) and give its non-empty lines, without the newline.

        `time_limit` bounds the whole stream (the server's `timeoutSeconds` plus a grace period), so
        a stalled stream ends as `Unreachable` instead of hanging forever.
        """
        client_timeout = aiohttp.ClientTimeout(
            total=time_limit, connect=connect_limit, sock_connect=connect_limit
        )
        response = await self._open(path, params, client_timeout)
        try:
            yield self._lines(response, path)
        finally:
            # close, not release: an unfinished chunked stream cannot go back to the pool.
            response.close()

    async def _lines(self, response: aiohttp.ClientResponse, path: str) -> AsyncIterator[bytes]:
        pending = b""
        try:
            async for chunk in response.content.iter_any():
                if pending:
                    chunk = pending + chunk
                start = 0
                while (end := chunk.find(b"\n", start)) != -1:
                    if end > start:
                        yield chunk[start:end]
                    start = end + 1
                pending = chunk[start:]
        except ClusterError:
            raise
        except Exception as error:
            raise translate(error, cluster=self.cluster, path=path) from error
        if pending.strip():
            yield pending
