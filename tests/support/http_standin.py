"""The one HTTP mechanism of the tests' stand-in servers (the misbehaving and the scripted chat servers, the hub): a
threaded server on a free local port, run from a daemon thread inside `with`, and handlers that answer JSON.

They stand in for a remote service, never for curate: curate and its libraries talk to them over real HTTP."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self


class JsonHandler(BaseHTTPRequestHandler):
    """Answers JSON and logs nothing (pytest's output stays the test's)."""

    def log_message(self, *args) -> None:
        pass

    def read_body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def reply_json(self, status: int, body) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class StandInServer(ThreadingHTTPServer):
    """Listens on 127.0.0.1 (a free port unless one is given) from construction, serves from `with` to its end."""

    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler], port: int = 0):
        super().__init__(("127.0.0.1", port), handler)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
        self.server_close()


class ChatHandler(JsonHandler):
    """An OpenAI-compatible chat server's handler: GET (/v1/models, the health check) lists the server's one model;
    a subclass answers POST, with `reply_chat` for a completion."""

    protocol_version = "HTTP/1.1"
    server: ChatStandIn

    def do_GET(self) -> None:
        self.reply_json(200, {"object": "list", "data": [{"id": self.server.model_id, "object": "model"}]})

    def read_request(self) -> dict:
        return json.loads(self.read_body() or b"{}")

    def reply_chat(self, request: dict, content: str, completion_tokens: int) -> None:
        self.reply_json(200, {
            "id": f"chatcmpl-{self.server.name}", "object": "chat.completion",
            "model": request.get("model", self.server.model_id),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": completion_tokens,
                      "total_tokens": 10 + completion_tokens},
        })


class ChatStandIn(StandInServer):
    """A chat server named NAME (its model is NAME-model); `url` is its OpenAI base URL."""

    name = "standin"

    def __init__(self, handler: type[ChatHandler], port: int = 0):
        super().__init__(handler, port)
        self.model_id = f"{self.name}-model"

    @property
    def url(self) -> str:
        return f"{self.endpoint}/v1"
