"""graphql-transport-ws messages as WebSocket text frames.

strawberry sends a message as a binary frame when the view's `encode_json` returns bytes
(ours does: orjson). The protocol's messages are JSON text, and browser clients — graphql-ws,
which GraphiQL and the Devices screens use — parse only text frames ("Message is missing the
'type' property"). This adapter encodes with orjson and sends text.
"""

from __future__ import annotations

from collections.abc import Mapping

import orjson
from starlette.websockets import WebSocketDisconnect
from strawberry.asgi import ASGIWebSocketAdapter
from strawberry.http.exceptions import WebSocketDisconnected


class TextFrames(ASGIWebSocketAdapter):
    async def send_json(self, message: Mapping[str, object]) -> None:
        try:
            await self.ws.send_text(orjson.dumps(message).decode())
        except WebSocketDisconnect as error:
            raise WebSocketDisconnected from error
