"""Test-only OpenAI-compatible chat server that misbehaves on purpose.

Each request draws one outcome from a seeded RNG: HTTP 500, a stall past the client's timeout, a
dropped connection (socket closed without an answer), an empty completion, truncated JSON in the
completion, or a well-formed `{"count": N}` answer. It counts what it did per outcome so a test
can compare the server's log with what the run recorded on each document.

    python -m tests.fault_server --port 8123 --rate-500 0.1 --rate-stall 0.05 ...
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FAULTS = ("error_500", "stall", "drop", "empty", "truncated")


class FaultServer:
    def __init__(self, rates: dict[str, float], stall_seconds: float = 5.0, seed: int = 0, port: int = 0):
        unknown = set(rates) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}; known: {FAULTS}")
        if sum(rates.values()) > 1:
            raise ValueError("fault rates add up to more than 1")
        self.rates = rates
        self.stall_seconds = stall_seconds
        self.random = random.Random(seed)
        self.lock = threading.Lock()
        self.outcomes: Counter[str] = Counter()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> FaultServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def draw(self) -> str:
        with self.lock:
            roll = self.random.random()
            for fault in FAULTS:
                roll -= self.rates.get(fault, 0.0)
                if roll < 0:
                    self.outcomes[fault] += 1
                    return fault
            self.outcomes["ok"] += 1
            return "ok"

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:  # /v1/models: health checks
                self._json(200, {"object": "list", "data": [{"id": "fault-model", "object": "model"}]})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                outcome = server.draw()
                if outcome == "error_500":
                    self._json(500, {"error": {"message": "injected internal error", "type": "server_error"}})
                elif outcome == "stall":
                    time.sleep(server.stall_seconds)
                    self.close_connection = True
                elif outcome == "drop":
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                else:
                    content = {"empty": "", "truncated": '{"count": '}.get(outcome, json.dumps({"count": 1}))
                    self._json(200, {
                        "id": "chatcmpl-fault", "object": "chat.completion", "model": request.get("model", "fault-model"),
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
                    })

            def _json(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=8123)
    parser.add_argument("--stall-seconds", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=0)
    for fault in FAULTS:
        parser.add_argument(f"--rate-{fault.replace('_', '-')}", type=float, default=0.0, dest=fault)
    args = parser.parse_args()
    rates = {fault: getattr(args, fault) for fault in FAULTS}
    with FaultServer(rates, args.stall_seconds, args.seed, args.port) as server:
        print(f"serving {server.url}", flush=True)
        server.thread.join()


if __name__ == "__main__":
    main()
