"""Resolve the hand-labelled cognitive-behaviour dev set back to its source texts.

``labels.jsonl`` stores only locators (no source text, for licensing reasons).
Each locator points into one file under the shared data directory:

* ``row``    0-based line index (JSON Lines) or row index (Parquet);
* ``path``   keys / list indices leading from the row to a string field;
* ``start`` / ``end`` (optional) Python ``str`` offsets into that string;
* ``sha256`` first 16 hex digits of the SHA-256 of the resolved text (UTF-8);
* optional consistency checks: ``thread_id`` (row field) and ``post_id`` /
  ``comment_id`` (``id`` of the object that holds the field).

``row`` indexes a JSON array for a file that holds one (``llm_adapters/*.json``).

Only the standard library and pyarrow (for the PRM800K Parquet file) are used.
The held-out set (``evals/heldout``) uses the same format and loader: ``load_devset(labels_path=...)``.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

BEHAVIORS = ("verification", "backtracking", "subgoal_setting", "backward_chaining")

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[3] / "shared" / "data"
ENV_VAR = "CURATE_SHARED_DATA"
LABELS_PATH = Path(__file__).resolve().parent / "labels.jsonl"


class DevsetUnavailable(RuntimeError):
    """The shared data (directory, file, or an exact text) needed by the dev set is missing."""


def cut_pieces(text: str, max_len: int = 2500, min_len: int = 1000) -> list[tuple[int, int]]:
    """The deterministic rule used to cut long Sky-T1 traces into labelled pieces.

    Paragraphs are the maximal runs between ``"\\n\\n"`` separators.  Consecutive
    paragraphs are packed greedily while the span (first paragraph start to last
    paragraph end) stays <= ``max_len``; a paragraph longer than ``max_len`` forms
    its own piece; a final piece shorter than ``min_len`` is merged into the
    previous one.  Returns ``(start, end)`` offsets into ``text``.
    """
    paras: list[tuple[int, int]] = []
    pos = 0
    for m in re.finditer(r"\n\n", text):
        if m.start() > pos:
            paras.append((pos, m.start()))
        pos = m.end()
    if pos < len(text):
        paras.append((pos, len(text)))
    pieces: list[tuple[int, int]] = []
    cur: list[int] | None = None
    for s, e in paras:
        if cur is None:
            cur = [s, e]
        elif e - cur[0] <= max_len:
            cur[1] = e
        else:
            pieces.append((cur[0], cur[1]))
            cur = [s, e]
    if cur is not None:
        if pieces and cur[1] - cur[0] < min_len:
            pieces[-1] = (pieces[-1][0], cur[1])
        else:
            pieces.append((cur[0], cur[1]))
    return pieces


def shared_data_dir(data_dir: str | os.PathLike | None) -> Path:
    if data_dir is None:
        data_dir = os.environ.get(ENV_VAR) or DEFAULT_DATA_DIR
    path = Path(data_dir)
    if not path.is_dir():
        raise DevsetUnavailable(
            f"shared data directory not found: {path} (set {ENV_VAR} to override)"
        )
    return path


def load_rows(path: Path, rows: set[int], fields: set[str]) -> dict[int, Any]:
    if not path.is_file():
        raise DevsetUnavailable(f"dev-set source file missing: {path}")
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError as exc:  # pragma: no cover - depends on environment
            raise DevsetUnavailable(f"pyarrow is required to read {path}") from exc
        table = pq.read_table(path, columns=sorted(fields))
        return {r: table.slice(r, 1).to_pylist()[0] for r in rows if r < table.num_rows}
    out: dict[int, Any] = {}
    if path.suffix == ".json":
        # Some .json files are JSON Lines (AQuA), others a single array (LLM-Adapters); peek at the start.
        with path.open(encoding="utf-8") as fh:
            is_array = fh.read(64).lstrip().startswith("[")
        if is_array:
            array = json.loads(path.read_text(encoding="utf-8"))
            return {r: array[r] for r in rows if r < len(array)}
    with path.open(encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            if i in rows:
                out[i] = json.loads(line)
    return out


def resolve_locator(row: Any, loc: dict, where: str) -> str:
    obj, parent = row, None
    for key in loc["path"]:
        parent = obj
        try:
            obj = obj[key]
        except (KeyError, IndexError, TypeError) as exc:
            raise DevsetUnavailable(f"{where}: path {loc['path']} not found") from exc
    if not isinstance(obj, str):
        raise DevsetUnavailable(f"{where}: path {loc['path']} is not a string")
    if "thread_id" in loc and row.get("thread_id") != loc["thread_id"]:
        raise DevsetUnavailable(f"{where}: thread_id mismatch")
    for key in ("post_id", "comment_id"):
        if key in loc and (not isinstance(parent, dict) or parent.get("id") != loc[key]):
            raise DevsetUnavailable(f"{where}: {key} mismatch")
    return obj[loc.get("start", 0):loc.get("end", len(obj))]


def load_devset(
    data_dir: str | os.PathLike | None = None, labels_path: str | os.PathLike = LABELS_PATH
) -> list[dict]:
    """Return ``[{"id", "source", "text", "labels"}, ...]`` in the order of ``labels_path`` (the dev set's
    ``labels.jsonl`` by default), plus ``split`` for an item that has one (the held-out set's tune/test).

    ``data_dir`` defaults to ``$CURATE_SHARED_DATA`` or :data:`DEFAULT_DATA_DIR`.
    Raises :class:`DevsetUnavailable` if the directory, a file, or a text is missing
    or does not match the stored checksum.
    """
    root = shared_data_dir(data_dir)
    items = [json.loads(l) for l in Path(labels_path).read_text(encoding="utf-8").splitlines() if l.strip()]
    by_source: dict[str, list[dict]] = {}
    for it in items:
        by_source.setdefault(it["source"], []).append(it)
    texts: dict[str, str] = {}
    for source, group in by_source.items():
        rows = {it["locator"]["row"] for it in group}
        fields = {it["locator"]["path"][0] for it in group}
        loaded = load_rows(root / source, rows, fields)
        for it in group:
            loc, where = it["locator"], f"{it['id']} ({source})"
            if loc["row"] not in loaded:
                raise DevsetUnavailable(f"{where}: row {loc['row']} not present")
            text = resolve_locator(loaded[loc["row"]], loc, where)
            if not text.strip():
                raise DevsetUnavailable(f"{where}: resolved text is empty")
            digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
            if "sha256" in loc and digest != loc["sha256"]:
                raise DevsetUnavailable(f"{where}: text checksum mismatch (data changed?)")
            texts[it["id"]] = text
    return [
        {"id": it["id"], "source": it["source"], "text": texts[it["id"]],
         "labels": {b: int(it["labels"][b]) for b in BEHAVIORS},
         **({"split": it["split"]} if "split" in it else {})}
        for it in items
    ]
