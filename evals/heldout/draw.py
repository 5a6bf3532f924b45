"""Draw the held-out set's items (seeded, reproducible) from the shared data, excluding every dev-set text.

    python evals/heldout/draw.py > candidates.jsonl

Prints one JSON object per item: ``id``, ``source``, ``locator``, ``selection`` and the resolved ``text`` (the
text is for the annotator to read; ``labels.jsonl`` keeps only the locator). The keyword pools only choose which
texts get read; the labels come from reading them (see GUIDE.md).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evals.devset.resolve import LABELS_PATH as DEV_LABELS
from evals.devset.resolve import cut_pieces, shared_data_dir

SEED = 20261130
SE_FILES = (
    "stackexchange_math/mathoverflow.net__mathematical-physics.jsonl",
    "stackexchange_math/math.stackexchange.com__mathematical-physics.jsonl",
    "stackexchange_math/mathoverflow.net__category-theory.jsonl",
    "stackexchange_math/math.stackexchange.com__category-theory.jsonl",
)
PRM = "prm800k/phase1_train_plus.stepwise-critic.parquet"
MATH500 = "longcot_skythought/sky-t1-math-correct-5K-27B_math500.jsonl"
AIME = "longcot_skythought/sky-t1-math-correct-5K-32B-ckpt140_aime24.jsonl"
AMC = "longcot_skythought/sky-t1-math-correct-5K-32B-short_amc23.jsonl"
GSM = "gsm8k/test_socratic.jsonl"
AQUA = ("aqua/dev.json", "aqua/test.json")
AQUA_MODEL = "llm_adapters/aqua_test_with_model_rationales.json"

CHECK = re.compile(r"\b(check|verify|verif|confirm|plug|make sure|double)", re.IGNORECASE)
REVISE = re.compile(r"\b(wait|actually|mistake|sorry|typo|wrong|oops|instead|scratch|redo|error)\b", re.IGNORECASE)
GOAL = re.compile(r"\b(first|then we|step 1|next,|need to find|we want|let's start|break)", re.IGNORECASE)
BACKWARD = re.compile(
    r"\b(suffices|enough to (show|prove|check)|reduces to|work(ing)? backwards?|in order (to|for)|"
    r"(to|we) (find|get|compute) [^.]{1,60}, (i|we) need|which requires|so (i|we) need to find|"
    r"it remains to)\b", re.IGNORECASE,
)
BACKWARD_STRICT = re.compile(
    r"\b(it suffices to|enough to (show|prove)|reduces to (showing|proving|finding)|work(ing)? backwards?|"
    r"to (find|get|compute|determine) [^.]{1,60}, (i|we) (need|must|have to)|so (i|we) (just )?need to find|"
    r"in order for)\b", re.IGNORECASE,
)
REVISE_STRICT = re.compile(
    r"\b(made a mistake|that's not right|that can't be right|doesn't work|different approach|try again|"
    r"start over|instead, let's|dead end|scratch that)\b", re.IGNORECASE,
)
BACKWARD_NEED = re.compile(
    r"\b(so|then|now) (i|we) (just |only )?need to (find|compute|determine|know|show)|"
    r"(i|we) need to find [^.]{1,40} first|it suffices|which (means|requires) (i|we) need|"
    r"if (i|we) can (find|show|get)\b", re.IGNORECASE,
)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def dev_keys() -> tuple[set, set]:
    """Locators of dev-set texts (exact) and their texts' digests (so a duplicate step text is excluded too)."""
    keys, digests = set(), set()
    for line in DEV_LABELS.read_text(encoding="utf-8").splitlines():
        if line.strip():
            item = json.loads(line)
            loc = item["locator"]
            keys.add((item["source"], loc["row"], tuple(loc["path"]), loc.get("start"), loc.get("end")))
            digests.add(loc["sha256"])
    return keys, digests


def shingles(text: str, n: int = 8) -> set:
    words = text.split()
    return {tuple(words[i:i + n]) for i in range(max(0, len(words) - n + 1))}


def main() -> None:
    root = shared_data_dir(None)
    rng = random.Random(SEED)
    dev, dev_digests = dev_keys()
    out: list[dict] = []
    taken: set = set()

    def add(prefix: str, cand: dict, selection: str) -> None:
        key = (cand["source"], cand["locator"]["row"], tuple(cand["locator"]["path"]),
               cand["locator"].get("start"), cand["locator"].get("end"))
        taken.add(key)
        n = sum(1 for o in out if o["id"].startswith(prefix + "-")) + 1
        out.append({"id": f"{prefix}-{n:04d}", **cand, "selection": selection})

    def fresh(cands: list[dict]) -> list[dict]:
        return [c for c in cands if c["key"] not in dev and c["key"] not in taken
                and c["locator"]["sha256"] not in dev_digests]

    def draw(prefix: str, cands: list[dict], k: int, selection: str, regex: re.Pattern | None = None) -> None:
        pool = [c for c in fresh(cands) if regex is None or regex.search(c["text"])]
        for c in rng.sample(pool, min(k, len(pool))):
            add(prefix, {f: c[f] for f in ("source", "locator", "text")}, selection)

    # Stack Exchange: whole fields of 40 to 3,500 characters, as in the dev set.
    se: dict[str, list[dict]] = {"q": [], "a": [], "c": []}
    for source in SE_FILES:
        for row, line in enumerate((root / source).open(encoding="utf-8")):
            thread = json.loads(line)
            tid = thread["thread_id"]

            def cand(kind, path, obj, id_key, _row=row, _tid=tid, _source=source):
                text = obj[path[-1]]
                if isinstance(text, str) and 40 <= len(text) <= 3500:
                    loc = {"row": _row, "thread_id": _tid, "path": path, id_key: obj["id"], "sha256": sha(text)}
                    se[kind].append({"source": _source, "locator": loc, "text": text,
                                     "key": (_source, _row, tuple(path), None, None)})

            cand("q", ["question", "body_text"], thread["question"], "post_id")
            for i, ans in enumerate(thread["answers"]):
                cand("a", ["answers", i, "body_text"], ans, "post_id")
            for j, com in enumerate(thread["comments"].get("question") or []):
                cand("c", ["comments", "question", j, "text"], com, "comment_id")
            for aid, coms in (thread["comments"].get("answers") or {}).items():
                for j, com in enumerate(coms):
                    cand("c", ["comments", "answers", aid, j, "text"], com, "comment_id")
    draw("se", se["q"], 6, "random")
    draw("se", se["a"], 8, "random")
    draw("se", se["c"], 8, "random")
    draw("se", se["a"], 7, "kw-a-bc", BACKWARD)
    draw("se", se["a"] + se["c"], 6, "kw-wait", REVISE)
    draw("se", se["a"], 3, "kw-a-check", CHECK)
    draw("se", se["a"] + se["q"], 3, "kw-first", GOAL)

    # PRM800K: distinct step texts.
    import pyarrow.parquet as pq

    steps = pq.read_table(root / PRM, columns=["next_response"]).column("next_response").to_pylist()
    seen, prm = set(), []
    for row, text in enumerate(steps):
        if isinstance(text, str) and text.strip() and text not in seen:
            seen.add(text)
            prm.append({"source": PRM, "locator": {"row": row, "path": ["next_response"], "sha256": sha(text)},
                        "text": text, "key": (PRM, row, ("next_response",), None, None)})
    draw("prm", prm, 12, "random")
    draw("prm", prm, 4, "kw-check", CHECK)
    draw("prm", prm, 5, "kw-back", REVISE)
    draw("prm", prm, 4, "kw-goal", GOAL)
    draw("prm", prm, 5, "kw-bc", BACKWARD)

    # Sky-T1 traces: pieces under the dev set's cutting rule, at most one random piece per trace, no piece
    # sharing more than 25% of its 8-word shingles with one already chosen (failing traces loop).
    def pieces(source: str) -> list[list[dict]]:
        per_trace = []
        for row, line in enumerate((root / source).open(encoding="utf-8")):
            trace = json.loads(line)["code"][0]
            group = []
            for p, (s, e) in enumerate(cut_pieces(trace)):
                text = trace[s:e]
                loc = {"row": row, "path": ["code", 0], "start": s, "end": e, "piece": p, "sha256": sha(text)}
                group.append({"source": source, "locator": loc, "text": text, "key": (source, row, ("code", 0), s, e)})
            per_trace.append(group)
        return per_trace

    chosen: list[set] = []

    def distinct(c: dict) -> bool:
        sh = shingles(c["text"])
        return all(len(sh & other) <= 0.25 * max(1, len(sh)) for other in chosen)

    def draw_pieces(prefix: str, per_trace: list[list[dict]], k: int, selection: str,
                    regex: re.Pattern | None = None) -> None:
        traces = list(range(len(per_trace)))
        rng.shuffle(traces)
        got = 0
        for t in traces:
            if got == k:
                break
            pool = [c for c in fresh(per_trace[t]) if regex is None or regex.search(c["text"])]
            rng.shuffle(pool)
            for c in pool:
                if distinct(c):
                    chosen.append(shingles(c["text"]))
                    add(prefix, {f: c[f] for f in ("source", "locator", "text")}, selection)
                    got += 1
                    break

    math500 = pieces(MATH500)
    draw_pieces("m500", math500, 16, "random")
    draw_pieces("m500", math500, 6, "kw-bc", BACKWARD)
    aime = pieces(AIME)
    draw_pieces("aime", aime, 6, "random")
    draw_pieces("aime", aime, 4, "kw-bc", BACKWARD)
    draw_pieces("amc", pieces(AMC), 3, "random")

    def whole(source: str, field: str) -> list[dict]:
        path = root / source
        if path.suffix == ".json" and path.read_text(encoding="utf-8").lstrip().startswith("["):
            rows = json.loads(path.read_text(encoding="utf-8"))
        else:
            rows = [json.loads(line) for line in path.open(encoding="utf-8")]
        return [{"source": source, "locator": {"row": r, "path": [field], "sha256": sha(row[field])},
                 "text": row[field], "key": (source, r, (field,), None, None)}
                for r, row in enumerate(rows) if isinstance(row[field], str) and row[field].strip()]

    draw("gsm", whole(GSM, "answer"), 6, "random")
    draw("aqua", whole(AQUA[0], "rationale") + whole(AQUA[1], "rationale"), 8, "random")
    draw("aquam", whole(AQUA_MODEL, "output"), 8, "random")
    # Second pass, drawn after the first 126 items were labelled and had only 10 backward-chaining and 15
    # backtracking positives: narrower pools for those two behaviours (appended, so the first items stay as drawn).
    draw_pieces("m500", math500, 8, "kw-bc2", BACKWARD_STRICT)
    draw("se", se["a"], 5, "kw-a-bc2", BACKWARD_STRICT)
    draw("prm", prm, 5, "kw-bc2", BACKWARD_STRICT)
    draw_pieces("m500", math500, 5, "kw-back2", REVISE_STRICT)
    draw("prm", prm, 4, "kw-back2", REVISE_STRICT)
    # Third pass, after 148 labelled items held 13 backward-chaining positives: the phrasings that carried them.
    draw("prm", prm, 10, "kw-bc3", BACKWARD_NEED)
    draw_pieces("aime", aime, 4, "kw-bc3", BACKWARD_NEED)
    draw_pieces("m500", math500, 6, "kw-bc3", BACKWARD_NEED)
    draw("se", se["c"] + se["q"], 4, "kw-bc3", BACKWARD_STRICT)
    for item in out:
        print(json.dumps(item, ensure_ascii=False))


if __name__ == "__main__":
    main()
