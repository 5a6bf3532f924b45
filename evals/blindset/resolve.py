"""Resolve the blind set's items back to their texts.

``items.jsonl`` (and, once the readers finish, the labels file) stores locators only. Items from the shared data
use the dev set's locator format and are resolved by ``evals/devset/resolve.py``'s own functions; Countdown items
(``source == "countdown"``) point into ``countdown_traces.jsonl`` in this folder, which the project wrote, and
resolve to ``"Numbers: [..], target: N\\n\\n" + text``, the exact text the readers were given.

    from evals.blindset.resolve import load_blindset
    items = load_blindset()                      # id, source, selection, split, text (+ labels once present)

A labels file in the dev set's format (``labels`` per item) can also be read with the dev set's loader for its
shared-data items; ``load_blindset`` reads both kinds.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evals.devset.resolve import BEHAVIORS, DevsetUnavailable, load_rows, resolve_locator, shared_data_dir

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ITEMS_PATH = HERE / "items.jsonl"
COUNTDOWN_PATH = HERE / "countdown_traces.jsonl"


def countdown_text(trace: dict) -> str:
    """The text a reader sees for a Countdown trace (the numbers and target, then the trace)."""
    return f"Numbers: {json.dumps(trace['numbers'])}, target: {trace['target']}\n\n{trace['text']}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def load_blindset(items_path: str | os.PathLike = ITEMS_PATH, data_dir: str | os.PathLike | None = None) -> list[dict]:
    """Return ``[{"id", "source", "selection", "split", "text", ...}]`` in file order, plus ``labels`` (0/1 per
    behaviour) for items that carry them. Raises :class:`DevsetUnavailable` if a text is missing or its checksum
    differs from the stored one."""
    items = [json.loads(l) for l in Path(items_path).read_text(encoding="utf-8").splitlines() if l.strip()]
    texts: dict[str, str] = {}
    countdown = [it for it in items if it["source"] == "countdown"]
    if countdown:
        traces: dict[str, dict] = {}
        for it in countdown:
            file = REPO / it["locator"]["file"]
            if file not in traces:
                traces[file] = {t["id"]: t for t in (json.loads(l) for l in
                                file.read_text(encoding="utf-8").splitlines() if l.strip())}
            trace = traces[file].get(it["locator"]["id"])
            if trace is None:
                raise DevsetUnavailable(f"{it['id']}: trace {it['locator']['id']} not in {file}")
            texts[it["id"]] = countdown_text(trace)
    shared = [it for it in items if it["source"] != "countdown"]
    if shared:
        root = shared_data_dir(data_dir)
        by_source: dict[str, list[dict]] = {}
        for it in shared:
            by_source.setdefault(it["source"], []).append(it)
        for source, group in by_source.items():
            rows = {it["locator"]["row"] for it in group}
            fields = {it["locator"]["path"][0] for it in group}
            loaded = load_rows(root / source, rows, fields)
            for it in group:
                where = f"{it['id']} ({source})"
                if it["locator"]["row"] not in loaded:
                    raise DevsetUnavailable(f"{where}: row {it['locator']['row']} not present")
                texts[it["id"]] = resolve_locator(loaded[it["locator"]["row"]], it["locator"], where)
    for it in items:
        text = texts[it["id"]]
        if not text.strip():
            raise DevsetUnavailable(f"{it['id']}: resolved text is empty")
        if "sha256" in it["locator"] and _digest(text) != it["locator"]["sha256"]:
            raise DevsetUnavailable(f"{it['id']}: text checksum mismatch (data changed?)")
    return [
        {"id": it["id"], "source": it["source"], "selection": it["selection"], "split": it["split"],
         "text": texts[it["id"]], **({"style": it["style"]} if "style" in it else {}),
         **({"labels": {b: int(it["labels"][b]) for b in BEHAVIORS}} if "labels" in it else {})}
        for it in items
    ]
