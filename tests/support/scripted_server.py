"""Test-only OpenAI-compatible chat server whose answers are scripted from the request, for the jobs whose output
must be well formed for the path under test to be reached at all (a random tiny model never writes a parseable
rewrite or verdict). It stands in for the model, never for curate: curate and datatrove run unchanged against it
(backend `endpoint`), the way they run against any OpenAI-compatible server.

- is_solution questions (the prompt asks for `contain_problem`): a verdict drawn from the document's md5: most are
  kept, some say no solution, some are unreadable prose;
- rewrite requests: <question>/<thoughts>/<answer> made of the document's own words, the thoughts scaled to
  ENRICHED_SCALE (first-person instructions) or MINIMIZED_SCALE (numbered steps) of the document's length, so the
  two sides change length by different factors as real rewrites do; some answers are unreadable.

It counts what it answered per outcome, so that a test can compare that with what the run recorded.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import Counter

from tests.support.http_standin import ChatHandler, ChatStandIn

ENRICHED_SCALE, MINIMIZED_SCALE = 0.5, 1.3
DOCUMENT = re.compile(r"<document>\n?(.*?)\n?</document>", re.DOTALL)


def _draw(document: str, salt: str) -> int:
    return int(hashlib.md5(f"{salt}:{document}".encode()).hexdigest(), 16) % 100


def verdict(document: str) -> tuple[str, str]:
    """(outcome, answer) for an is_solution question."""
    roll = _draw(document, "solution")
    if roll < 70:
        return "kept", '<think>It states a task and works it out.</think>\n{"contain_problem": true, "contain_solution": true}'
    if roll < 85:
        return "no_solution", '{"contain_problem": true, "contain_solution": false}'
    return "unreadable", "This document is about mathematics."


def rewrite(document: str, enriched: bool) -> tuple[str, str]:
    """(outcome, answer) for a rewrite request."""
    words = document.split() or ["empty"]
    if _draw(document, "rewrite") < 10:
        return "unreadable_rewrite", "I would rather summarise this document in my own words."
    scale = ENRICHED_SCALE if enriched else MINIMIZED_SCALE
    n = max(1, round(len(words) * scale))
    thoughts = " ".join(words[i % len(words)] for i in range(n))
    return "rewrite", (f"<question>{' '.join(words[:8])}</question>\n<thoughts>{thoughts}</thoughts>\n"
                       f"<answer>{' '.join(words[-3:])}</answer>")


class ScriptedHandler(ChatHandler):
    server: ScriptedServer

    def do_POST(self) -> None:
        request = self.read_request()
        content = self.server.answer(request)
        self.reply_chat(request, content, completion_tokens=len(content.split()))


class ScriptedServer(ChatStandIn):
    name = "scripted"

    def __init__(self, port: int = 0):
        self.lock = threading.Lock()
        self.outcomes: Counter[str] = Counter()
        super().__init__(ScriptedHandler, port)

    def answer(self, request: dict) -> str:
        user = request["messages"][-1]["content"]
        match = DOCUMENT.search(user)
        document = match.group(1) if match else user
        if "contain_problem" in user:
            outcome, text = verdict(document)
        else:
            outcome, text = rewrite(document, enriched="first person" in user)
        with self.lock:
            self.outcomes[outcome] += 1
        return text
