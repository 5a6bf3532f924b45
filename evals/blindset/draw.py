"""Draw the blind set's items (seeded, reproducible) from the shared data plus the project-authored Countdown traces.

    python evals/blindset/draw.py [--out /tmp/blind/candidates.jsonl] [--items evals/blindset/items.jsonl]
    python evals/blindset/draw.py --round 2 --out /tmp/blind2/candidates.jsonl   # evals/blindset/round2/
    python evals/blindset/draw.py --round 3 --out /tmp/blind3/candidates.jsonl   # evals/blindset/round3/

Round 2 is a fresh test set, drawn after round 1's test half had been reported once and so became tuning text: the
same sources, pools and rules at half the size, a new seed, round 1's items excluded as well, no Countdown traces,
and every item in the test split. Round 3 repeats round 2's rules with its own seed, after round 2 had been reported
once (cues_v3, cues_v4) and became tuning text; rounds 1 and 2 are both excluded. Round 5 does the same after round
3 and the precision read (round 4's pool) were read for cues_v5; rounds 4 and 6 are pools for the precision reads
(bench/precision_read.py), whose items files hold only the texts read.

Writes the reading material (``id``, ``source``, ``selection``, ``split``, ``text``; shuffled so sources are
interleaved) to ``--out``, which must stay OUTSIDE the repository (the real texts are not ours to store), and the
text-free item list (``id``, ``source``, ``locator``, ``selection``, ``split``; ``style`` for Countdown) to
``--items``. Prints the counts per id prefix x selection x split and per source file x split (GUIDE.md has them).

Every text already in the dev set (``evals/devset/labels.jsonl``) or the held-out set
(``evals/heldout/labels.jsonl``) is excluded by locator and by SHA-256 digest, and long-trace pieces sharing more
than 25% of their 8-word shingles with an earlier set's piece or an already chosen piece are skipped. The keyword
pools below were written for this draw; they only choose which texts get read. Labels come from two independent
readers (see GUIDE.md), never from these regexes or from any classifier.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evals.blindset.resolve import countdown_text, load_blindset
from evals.devset.resolve import LABELS_PATH as DEV_LABELS
from evals.devset.resolve import cut_pieces, load_devset, shared_data_dir

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
HELDOUT_LABELS = REPO / "evals" / "heldout" / "labels.jsonl"
COUNTDOWN = HERE / "countdown_traces.jsonl"
COUNTDOWN_REL = "evals/blindset/countdown_traces.jsonl"
ITEMS = HERE / "items.jsonl"

SEED = 20261201
ROUNDS = {  # seed, size factor of every pool, the folder of its items
    1: (SEED, 1.0, HERE),
    2: (20261202, 0.5, HERE / "round2"),
    3: (20261203, 0.5, HERE / "round3"),
    # Not a labeled round: the pool the precision read draws classifier-positive texts from (evals/blindset/precision).
    4: (20261204, 1.5, HERE / "precision"),
    5: (20261205, 0.5, HERE / "round5"),
    # The second precision read's pool (cues_v6), drawn after round 5 (evals/blindset/precision2).
    6: (20261206, 1.5, HERE / "precision2"),
    # Rounds 7-12 are Countdown traces written for the project, not drawn. Round 13 repeats round 5's rules after
    # round 5 had been read for cues_v6 ... cues_v11, as the real-text test set of cues_v12.
    13: (20261213, 0.5, HERE / "round13"),
    # Round 15 repeats round 5's rules after round 13 became training text of cues_ngram_v1: the real-text test set of
    # the next revision. Round 16 is the third precision read's pool (evals/blindset/precision3).
    15: (20261215, 0.5, HERE / "round15"),
    16: (20261216, 1.5, HERE / "precision3"),
    # Rounds 17 and 18 are Countdown traces written for the project. Round 19 repeats round 5's rules after round 15
    # and the third precision read became training text of cues_ngram_v2: its real-text test set.
    19: (20261219, 0.5, HERE / "round19"),
    # The fourth precision read's pool (cues_ngram_v2), drawn after round 19 (evals/blindset/precision4).
    20: (20261220, 1.5, HERE / "precision4"),
}
SE_FILES = (
    "stackexchange_math/mathoverflow.net__mathematical-physics.jsonl",
    "stackexchange_math/math.stackexchange.com__mathematical-physics.jsonl",
    "stackexchange_math/mathoverflow.net__category-theory.jsonl",
    "stackexchange_math/math.stackexchange.com__category-theory.jsonl",
)
PRM_TRAIN = "prm800k/phase1_train_plus.stepwise-critic.parquet"
PRM_TEST = "prm800k/phase1_test.stepwise-critic.parquet"
MATH500 = "longcot_skythought/sky-t1-math-correct-5K-27B_math500.jsonl"
AIME = "longcot_skythought/sky-t1-math-correct-5K-32B-ckpt140_aime24.jsonl"
AMC = "longcot_skythought/sky-t1-math-correct-5K-32B-short_amc23.jsonl"
GSM_TRAIN = "gsm8k/train.jsonl"
GSM_SOCRATIC = "gsm8k/test_socratic.jsonl"
GSM_MODEL = "gsm8k/example_model_solutions.jsonl"
GSM_MODEL_FIELDS = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")
AQUA = ("aqua/dev.json", "aqua/test.json")
AQUA_MODEL = "llm_adapters/aqua_test_with_model_rationales.json"

MAX_WHOLE = 3500   # whole-field texts longer than this are not eligible (as in the dev and held-out sets)
MIN_SE = 40        # SE fields shorter than this are not eligible (as in the dev and held-out sets)
MAX_PIECE = 3000   # long-trace pieces longer than this are not eligible
SHINGLE_OVERLAP = 0.25

# Keyword pools, written for this draw (not taken from any classifier). Loose on purpose: they raise the share of
# texts worth reading for each behaviour and bring in look-alike negatives with them.
KW = {
    "check": re.compile(
        r"\b(check(s|ed|ing)?|verif\w*|confirm\w*|sanity|double[- ]?check\w*|make sure|plug(ging|ged)? (it |this |"
        r"these |that |them )?(back|in)|substitut\w* (it |this |these )?back|let'?s see if|let me see if|"
        r"does (this|that|it) (work|satisfy|hold|make sense)|is (this|that) (right|correct)|as expected|"
        r"consistent with|agrees? with)\b", re.IGNORECASE),
    "revise": re.compile(
        r"\b(wait|hmm+|oops|mistake\w*|wrong|incorrect|my bad|scratch that|start over|try again|(another|a different|"
        r"a better) (way|approach|method|idea)|doesn'?t work|won'?t work|didn'?t work|dead end|go back|reconsider|"
        r"redo|i was wrong|i misread|on second thought|that'?s not (right|it|true)|let'?s not)\b", re.IGNORECASE),
    "goal": re.compile(
        r"\b(first,? (we|i|let'?s|note)|step \d|step one|next,? (we|i|let'?s)|then we|finally,? we|our (goal|aim|plan)|"
        r"the plan|break (it|this|the problem) (down|into)|split (it |this )?into|two (parts|steps|cases)|case \d|"
        r"start (by|with)|begin (by|with)|let'?s (find|compute|determine|figure out)|(i|we) (will|shall) (first|now))\b",
        re.IGNORECASE),
    "backward": re.compile(
        r"\b(suffices?|sufficient to|enough to (show|prove|check|find|know)|reduces? to|work(ing)? backwards?|"
        r"(i|we) need (to|that)|(i|we) must (have|show|find|prove)|for (this|that|it|the \w+) to (hold|be|work|exist)|"
        r"in order for|would (need|require)|requires? that|it remains to|we'?d need|what (we|i) need|the goal is|"
        r"to (get|reach|find|obtain|make) [^.\n]{1,50}, (we|i) (need|must|have to|should))\b", re.IGNORECASE),
}


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def shingles(text: str, n: int = 8) -> set:
    words = text.split()
    return {tuple(words[i:i + n]) for i in range(max(0, len(words) - n + 1))}


def loc_key(source: str, loc: dict) -> tuple:
    return (source, loc["row"], tuple(loc["path"]), loc.get("start"), loc.get("end"))


def earlier_sets(root: Path, rounds: int = 1) -> tuple[set, set, list[dict]]:
    """Locator keys and digests of every dev-set, held-out and earlier-round text, and their resolved items (for
    shingles)."""
    keys, digests, resolved = set(), set(), []
    for path in (DEV_LABELS, HELDOUT_LABELS):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                item = json.loads(line)
                keys.add(loc_key(item["source"], item["locator"]))
                digests.add(item["locator"]["sha256"])
        resolved += load_devset(root, labels_path=path)
    for earlier in sorted(r for r in ROUNDS if r < rounds):
        items_path = ROUNDS[earlier][2] / "items.jsonl"
        for it in load_blindset(items_path=items_path, data_dir=root):
            if it["source"] != "countdown":
                resolved.append(it)
        for line in items_path.read_text(encoding="utf-8").splitlines():
            if line.strip() and (item := json.loads(line))["source"] != "countdown":
                keys.add(loc_key(item["source"], item["locator"]))
                digests.add(item["locator"]["sha256"])
    digests |= {sha(it["text"]) for it in resolved}
    return keys, digests, resolved


def stratum(item: dict) -> tuple:
    return (item["id"].split("-")[0], item["selection"])


def assign_splits(items: list[dict]) -> None:
    """Within each stratum (id prefix x selection; for Countdown traces the style), order the ids by the SHA-256 of
    the id and alternate tune, test, tune, ... Assigned before anyone labels."""
    groups: dict[tuple, list[dict]] = {}
    for it in items:
        key = ("cd", it["style"]) if it["id"].startswith("cd-") else stratum(it)
        groups.setdefault(key, []).append(it)
    for group in groups.values():
        group.sort(key=lambda it: hashlib.sha256(it["id"].encode("utf-8")).hexdigest())
        for i, it in enumerate(group):
            it["split"] = "tune" if i % 2 == 0 else "test"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--round", type=int, choices=sorted(ROUNDS), default=1)
    ap.add_argument("--out", default=None, help="default /tmp/blind/candidates.jsonl (round 2: /tmp/blind2/...)")
    ap.add_argument("--items", default=None, help="default: items.jsonl in the round's folder")
    args = ap.parse_args(argv)
    seed, scale, folder = ROUNDS[args.round]
    out_path = Path(args.out or ("/tmp/blind/candidates.jsonl" if args.round == 1 else
                                 f"/tmp/blind{args.round}/candidates.jsonl")).resolve()
    items_path = Path(args.items) if args.items else folder / "items.jsonl"
    if REPO in out_path.parents:
        sys.exit("--out must be outside the repository: real texts are not stored in it")

    root = shared_data_dir(None)
    old_keys, old_digests, old_items = earlier_sets(root, args.round)
    # Drawing state; reset() restarts the seeded draw from scratch (see the sizing loop below).
    rng = random.Random(seed)
    out: list[dict] = []
    taken_keys: set = set()
    taken_digests: set = set()
    counters: Counter = Counter()
    chosen: list[set] = []
    # Near-duplicates are judged against every earlier set's long-trace piece too (failing traces loop, so two
    # different pieces of one trace can be almost the same text).
    old_shingles = [shingles(it["text"]) for it in old_items if it["source"].startswith("longcot_skythought/")]

    def size(k: int) -> int:
        return round(k * scale)

    def reset() -> None:
        rng.seed(seed)
        out.clear()
        taken_keys.clear()
        taken_digests.clear()
        counters.clear()
        chosen[:] = old_shingles

    def add(prefix: str, cand: dict, selection: str) -> None:
        taken_keys.add(cand["key"])
        taken_digests.add(cand["locator"]["sha256"])
        counters[prefix] += 1
        tag = "" if args.round == 1 else f"r{args.round}-"  # ids stay unique across rounds
        out.append({"id": f"{prefix}-{tag}{counters[prefix]:04d}", "source": cand["source"],
                    "locator": cand["locator"], "selection": selection, "text": cand["text"]})

    def fresh(cands: list[dict]) -> list[dict]:
        return [c for c in cands if c["key"] not in old_keys and c["key"] not in taken_keys
                and c["locator"]["sha256"] not in old_digests and c["locator"]["sha256"] not in taken_digests]

    def draw(prefix: str, cands: list[dict], k: int, selection: str, regex: re.Pattern | None = None) -> int:
        pool = [c for c in fresh(cands) if regex is None or regex.search(c["text"])]
        got = 0
        for c in rng.sample(pool, len(pool)):
            if got == k:
                break
            if c["locator"]["sha256"] in taken_digests:   # the same text twice in one pool (PRM repeats steps)
                continue
            add(prefix, c, selection)
            got += 1
        return got

    # ---- Stack Exchange: whole fields of 40 to 3,500 characters.
    se: dict[str, list[dict]] = {"q": [], "a": [], "c": []}
    for source in SE_FILES:
        for row, line in enumerate((root / source).open(encoding="utf-8")):
            thread = json.loads(line)
            tid = thread["thread_id"]

            def cand(kind, path, obj, id_key, _row=row, _tid=tid, _source=source):
                text = obj[path[-1]]
                if isinstance(text, str) and MIN_SE <= len(text) <= MAX_WHOLE:
                    loc = {"row": _row, "thread_id": _tid, "path": path, id_key: obj["id"], "sha256": sha(text)}
                    se[kind].append({"source": _source, "locator": loc, "text": text, "key": loc_key(_source, loc)})

            cand("q", ["question", "body_text"], thread["question"], "post_id")
            for i, ans in enumerate(thread["answers"]):
                cand("a", ["answers", i, "body_text"], ans, "post_id")
            for j, com in enumerate(thread["comments"].get("question") or []):
                cand("c", ["comments", "question", j, "text"], com, "comment_id")
            for aid, coms in (thread["comments"].get("answers") or {}).items():
                for j, com in enumerate(coms):
                    cand("c", ["comments", "answers", aid, j, "text"], com, "comment_id")
    se_all = se["q"] + se["a"] + se["c"]

    # ---- PRM800K: distinct step texts from both parquet files.
    import pyarrow.parquet as pq

    def prm_steps(source: str) -> list[dict]:
        steps = pq.read_table(root / source, columns=["next_response"]).column("next_response").to_pylist()
        seen, got = set(), []
        for row, text in enumerate(steps):
            if isinstance(text, str) and text.strip() and len(text) <= MAX_WHOLE and text not in seen:
                seen.add(text)
                loc = {"row": row, "path": ["next_response"], "sha256": sha(text)}
                got.append({"source": source, "locator": loc, "text": text, "key": loc_key(source, loc)})
        return got

    prm_train, prm_test = prm_steps(PRM_TRAIN), prm_steps(PRM_TEST)

    # ---- Sky-T1 traces: pieces under the dev set's cutting rule.
    def pieces(source: str) -> list[list[dict]]:
        per_trace = []
        for row, line in enumerate((root / source).open(encoding="utf-8")):
            trace = json.loads(line)["code"][0]
            group = []
            for p, (s, e) in enumerate(cut_pieces(trace)):
                text = trace[s:e]
                if e - s > MAX_PIECE or not text.strip():
                    continue
                loc = {"row": row, "path": ["code", 0], "start": s, "end": e, "piece": p, "sha256": sha(text)}
                group.append({"source": source, "locator": loc, "text": text, "key": loc_key(source, loc)})
            per_trace.append(group)
        return per_trace

    def distinct(c: dict) -> bool:
        sh = shingles(c["text"])
        return all(len(sh & other) <= SHINGLE_OVERLAP * max(1, len(sh)) for other in chosen)

    def draw_pieces(prefix: str, per_trace: list[list[dict]], k: int, selection: str,
                    regex: re.Pattern | None = None) -> int:
        """At most one piece per trace in this pool."""
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
                    add(prefix, c, selection)
                    got += 1
                    break
        return got

    def whole(source: str, path: list) -> list[dict]:
        file = root / source
        text = file.read_text(encoding="utf-8")
        rows = json.loads(text) if text.lstrip().startswith("[") else [json.loads(l) for l in text.splitlines() if l.strip()]
        got = []
        for r, row in enumerate(rows):
            obj = row
            for key in path:
                obj = obj[key]
            if isinstance(obj, str) and obj.strip() and len(obj) <= MAX_WHOLE:
                loc = {"row": r, "path": list(path), "sha256": sha(obj)}
                got.append({"source": source, "locator": loc, "text": obj, "key": loc_key(source, loc)})
        return got

    math500, aime, amc = pieces(MATH500), pieces(AIME), pieces(AMC)
    gsm_train, gsm_socratic = whole(GSM_TRAIN, ["answer"]), whole(GSM_SOCRATIC, ["answer"])
    gsm_answers = gsm_train + gsm_socratic
    gsm_model = [c for f in GSM_MODEL_FIELDS for c in whole(GSM_MODEL, [f, "solution"])]
    aqua = whole(AQUA[0], ["rationale"]) + whole(AQUA[1], ["rationale"])
    aqua_model = whole(AQUA_MODEL, ["output"])

    # ---- The plan per id prefix: (aim, candidates for sizing, is_pieces, random pools, keyword pools); a pool is
    # (name, candidates, k). Random pools (about 60% of each source) are drawn first, before any keyword pool, so
    # they are a plain random sample of what the earlier sets left. Where the keyword pools of a source cannot
    # fill their share (few matches, e.g. AMC and the AQuA model rationales), the first random pool of that
    # source is enlarged by the shortfall and the whole draw is redone from the seed, until every source reaches
    # its aim; "random" thus stays a plain random sample.
    plan = {
        "bse": (150, [("random", se["q"], 25), ("random", se["a"], 35), ("random", se["c"], 30)],
                [("check", se_all, 15), ("revise", se["a"] + se["c"], 15), ("goal", se["a"] + se["q"], 15),
                 ("backward", se_all, 15)], False),
        "bprm": (120, [("random", prm_train, 56), ("random", prm_test, 16)],
                 [(name, prm_train + prm_test, 12) for name in KW], False),
        "bm500": (110, [("random", math500, 66)], [(name, math500, 11) for name in KW], True),
        "baime": (40, [("random", aime, 24)], [(name, aime, 4) for name in KW], True),
        "bamc": (20, [("random", amc, 12)], [(name, amc, 2) for name in KW], True),
        "bgsm": (40, [("random", gsm_train, 14), ("random", gsm_socratic, 10)],
                 [(name, gsm_answers, 4) for name in KW], False),
        "bgsmm": (40, [("random", gsm_model, 24)], [(name, gsm_model, 4) for name in KW], False),
        "baqua": (50, [("random", aqua, 30)], [(name, aqua, 5) for name in KW], False),
        "baquam": (50, [("random", aqua_model, 30)], [(name, aqua_model, 5) for name in KW], False),
    }
    aims = {prefix: sum(size(k) for _n, _c, k in randoms + kws) for prefix, (_a, randoms, kws, _p) in plan.items()}
    assert scale != 1.0 or aims == {prefix: plan[prefix][0] for prefix in plan}
    extra: Counter = Counter()
    previous_short: dict = {}
    for _attempt in range(10):
        reset()
        for prefix, (aim, randoms, kws, is_pieces) in plan.items():
            fn = draw_pieces if is_pieces else draw
            for i, (_name, cands, k) in enumerate(randoms):
                fn(prefix, cands, size(k) + (extra[prefix] if i == 0 else 0), "random")
        for prefix, (aim, randoms, kws, is_pieces) in plan.items():
            fn = draw_pieces if is_pieces else draw
            for name, cands, k in kws:
                fn(prefix, cands, size(k), f"kw-{name}", KW[name])
        short = {p: aims[p] - counters[p] for p in plan if counters[p] < aims[p]}
        if not short:
            break
        if args.round > 1 and short == previous_short:  # the source is used up by the earlier sets: keep what is left
            print(f"sources used up by the earlier sets, short of the aim by: {short}")
            break
        previous_short = short
        extra.update(short)
    else:
        sys.exit(f"cannot reach the aims: {short}")

    # ---- Countdown traces written for the project (round 1 only: round 2 holds none).
    traces = [json.loads(l) for l in COUNTDOWN.read_text(encoding="utf-8").splitlines() if l.strip()]
    for tr in traces if args.round == 1 else []:
        text = countdown_text(tr)
        out.append({"id": tr["id"], "source": "countdown", "style": tr["style"],
                    "locator": {"file": COUNTDOWN_REL, "id": tr["id"], "sha256": sha(text)},
                    "selection": "authored", "text": text})

    assign_splits(out)
    if args.round > 1:  # round 1's halves are all tuning text now; a later round is a test set only
        for it in out:
            it["split"] = "test"

    ids = [it["id"] for it in out]
    assert len(ids) == len(set(ids)), "duplicate ids"
    digests = [it["locator"]["sha256"] for it in out]
    assert len(digests) == len(set(digests)), "duplicate texts"
    assert not set(digests) & old_digests
    for it in out:
        if it["source"] != "countdown":
            assert (len(it["text"]) <= MAX_PIECE) if "start" in it["locator"] else (len(it["text"]) <= MAX_WHOLE)

    items = [{"id": it["id"], "source": it["source"], "locator": it["locator"], "selection": it["selection"],
              **({"style": it["style"]} if "style" in it else {}), "split": it["split"]} for it in out]
    items_path.parent.mkdir(parents=True, exist_ok=True)
    items_path.write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items), encoding="utf-8")

    reading = [{"id": it["id"], "source": it["source"], "selection": it["selection"], "split": it["split"],
                "text": it["text"]} for it in out]
    random.Random(seed + 1).shuffle(reading)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in reading), encoding="utf-8")

    print(summary(items))
    if extra:
        print("\nrandom pools enlarged to cover short keyword pools:", dict(extra))


def summary(items: list[dict]) -> str:
    """Two tables: id prefix x selection (Countdown: style) x split, then source file x split."""
    def order(prefix: str) -> int:
        return ORDER.index(prefix) if prefix in ORDER else len(ORDER)

    def table(key, header: str) -> list[str]:
        rows: Counter = Counter((key(it), it["split"]) for it in items)
        keys = sorted({k for k, _ in rows}, key=lambda k: (order(k[0]), k[1] != "random", k[1:]))
        lines = [f"| {header} | tune | test | total |", "|" + "---|" * (header.count("|") + 4)]
        for k in keys:
            tu, te = rows[(k, "tune")], rows[(k, "test")]
            lines.append("| " + " | ".join(f"`{x}`" for x in k) + f" | {tu} | {te} | {tu + te} |")
        tu, te = sum(v for (k, sp), v in rows.items() if sp == "tune"), sum(v for (k, sp), v in rows.items() if sp == "test")
        lines.append("| **total** |" + " |" * header.count("|") + f" {tu} | {te} | {tu + te} |")
        return lines

    by_pool = table(lambda it: (it["id"].split("-")[0], it.get("style", it["selection"])), "prefix | selection")
    by_file = table(lambda it: (it["id"].split("-")[0], it["source"]), "prefix | source")
    return "\n".join(by_pool + [""] + by_file)


ORDER = ["bse", "bprm", "bm500", "baime", "bamc", "bgsm", "bgsmm", "baqua", "baquam", "cd"]

if __name__ == "__main__":
    main()
