"""Test-only OpenAI-compatible chat server that misbehaves on purpose.

Each request draws one outcome from a seeded RNG: HTTP 500, a stall past the client's timeout, a
dropped connection (socket closed without an answer), an empty completion, truncated JSON in the
completion, or a well-formed `{"count": N}` answer. It counts what it did per outcome so a test
can compare the server's log with what the run recorded on each document.

    python -m tests.support.fault_server --port 8123 --rate-500 0.1 --rate-stall 0.05 ...
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import threading
import time
from collections import Counter

from tests.support.http_standin import ChatHandler, ChatStandIn

FAULTS = ("error_500", "stall", "drop", "empty", "truncated")


class FaultHandler(ChatHandler):
    server: FaultServer

    def do_POST(self) -> None:
        request = self.read_request()
        outcome = self.server.draw()
        if outcome == "error_500":
            self.reply_json(500, {"error": {"message": "injected internal error", "type": "server_error"}})
        elif outcome == "stall":
            time.sleep(self.server.stall_seconds)
            self.close_connection = True
        elif outcome == "drop":
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
        else:
            content = {"empty": "", "truncated": '{"count": '}.get(outcome, json.dumps({"count": 1}))
            self.reply_chat(request, content, completion_tokens=3)


class FaultServer(ChatStandIn):
    name = "fault"

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
        super().__init__(FaultHandler, port)

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
