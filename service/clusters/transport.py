"""The raw HTTP edge to one cluster: GET a body as bytes, or stream a watch line by line.

Requests go through kubernetes_asyncio's `ApiClient.call_api` with `_preload_content=False`, so
authentication (bearer tokens, client certificates, exec plugins and their refresh), TLS and
proxies are the client's, while bodies stay raw bytes: the generated model classes are never
built (they are slow and would tie the core to the client). Every failure leaves this module
as a `service.clusters.errors.ClusterError`; nothing else in the package touches aiohttp.

Watch streams are split into lines here rather than with aiohttp's `readline`, whose limit
(128 KiB) a ResourceSlice of 128 devices can exceed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import aiohttp

from dra_mirror.service.clusters.errors import ClusterError, from_status, translate
from dra_mirror.service.clusters.kube_client import ApiClient

Query = Mapping[str, str | int | bool]


def _query(params: Query) -> list[tuple[str, str]]:
    # Kubernetes expects lower-case booleans; urlencode would send "True".
    return [
        (k, ("true" if v else "false") if isinstance(v, bool) else str(v))
        for k, v in params.items()
    ]


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
