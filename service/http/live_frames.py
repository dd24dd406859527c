"""graphql-transport-ws messages as WebSocket text frames, each operation rate-limited.

strawberry sends a message as a binary frame when the view's `encode_json` returns bytes
(ours does: orjson). The protocol's messages are JSON text, and browser clients — graphql-ws,
which GraphiQL and the Devices screens use — parse only text frames ("Message is missing the
'type' property"). This adapter encodes with orjson and sends text.

It also asks the view (`ws_refusal`, service.http.graphql_http) before handing on each
`subscribe`: an operation over the subject's rate limit is answered with an `error` message
for its id and never run. When the connection ends, the task checking its credentials again
(`RECHECK_KEY`) is stopped.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping

import orjson
from starlette.websockets import WebSocketDisconnect
from strawberry.asgi import ASGIWebSocketAdapter
from strawberry.http.exceptions import WebSocketDisconnected

RECHECK_KEY = "dra_mirror.recheck"  # service.http.graphql_http's


class TextFrames(ASGIWebSocketAdapter):
    async def iter_json(
        self, *, ignore_parsing_errors: bool = False
    ) -> AsyncGenerator[object, None]:
        refusal_of = getattr(self.view, "ws_refusal", None)
        try:
            async for message in super().iter_json(ignore_parsing_errors=ignore_parsing_errors):
                if (
                    refusal_of is not None
                    and isinstance(message, dict)
                    and message.get("type") == "subscribe"
                ):
                    refusal = refusal_of(self.ws.scope)
                    if refusal is not None:
                        await self.send_json(
                            {"id": message.get("id"), "type": "error", "payload": [refusal]}
                        )
                        continue
                yield message
        finally:
            task = (self.ws.scope.get("state") or {}).pop(RECHECK_KEY, None)
            if task is not None:
                task.cancel()

    async def send_json(self, message: Mapping[str, object]) -> None:
        try:
            await self.ws.send_text(orjson.dumps(message).decode())
        except WebSocketDisconnect as error:
            raise WebSocketDisconnected from error
