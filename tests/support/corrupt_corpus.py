"""Generator of corrupted corpora for the bad-input suite and for trying a deployment by hand.

`write_corrupt_corpus(folder, ...)` writes a directory of jsonl/parquet files that mixes valid
documents with: truncated JSON, binary blobs, NUL bytes, invalid UTF-8, duplicate ids, missing
fields, non-string text, a parquet file with the wrong schema, one big document and many tiny
ones. It returns the ids every correct reader must keep and the number of records it must reject (a second
copy of an id is one: the copy kept is the first in file name and position order).

    python -m tests.corrupt_corpus OUT_DIR --big-mb 50 --tiny 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

SENTENCES = [
    "Let me check: 12 * 7 = 84, which matches the total.",
    "Wait, that is wrong; I should try a different approach.",
    "First, we find the roots. Then we substitute them back.",
    "Working backwards from the goal, we need x = 5.",
    "The area of the triangle is half the base times the height.",
]


@dataclass
class CorruptCorpus:
    folder: Path
    valid_ids: set[str] = field(default_factory=set)
    duplicate_ids: set[str] = field(default_factory=set)
    first_copies: dict[str, str] = field(default_factory=dict)  # a duplicated id -> the text of the copy kept
    rejects: int = 0  # records (or whole files) that must land in the rejects with a reason


def _doc(doc_id: str, rng: random.Random) -> bytes:
    return json.dumps({"id": doc_id, "text": " ".join(rng.choices(SENTENCES, k=3))}).encode()


def write_corrupt_corpus(folder: str | Path, big_mb: float = 2.0, tiny: int = 2000, seed: int = 0) -> CorruptCorpus:
    rng = random.Random(seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    corpus = CorruptCorpus(folder)

    lines: list[bytes] = []
    for i in range(20):
        lines.append(_doc(f"good-{i}", rng))
        corpus.valid_ids.add(f"good-{i}")
    good_zero = json.loads(lines[0])["text"]
    bad = [
        _doc("cut", rng)[:25],                                          # truncated JSON
        bytes(rng.getrandbits(8) for _ in range(200)).replace(b"\n", b" "),  # binary blob
        b'{"id": "nul", "text": "a\x00b"',                              # NUL byte inside broken JSON
        b'{"id": "utf8", "text": "caf\xe9 \xff\xfe"}',                  # invalid UTF-8
        json.dumps({"id": "no-text", "body": "text under another key"}).encode(),
        json.dumps({"id": "null-text", "text": None}).encode(),
        json.dumps({"id": "list-text", "text": ["a", "b"]}).encode(),
        json.dumps({"id": "blank", "text": " \t\n"}).encode(),
        b"[1, 2, 3]",
        b"\x00\x00\x00\x00",
    ]
    corpus.rejects += len(bad)
    # A NUL escaped inside valid JSON is legal text: it must be kept, not rejected.
    lines.append(json.dumps({"id": "escaped-nul", "text": "before\u0000after, we check 2 + 2 = 4."}).encode())
    corpus.valid_ids.add("escaped-nul")
    for i in range(3):
        lines += [_doc(f"dup-{i}", rng), _doc(f"dup-{i}", rng)]
        corpus.valid_ids.add(f"dup-{i}")
        corpus.duplicate_ids.add(f"dup-{i}")
    corpus.rejects += 3
    mixed = lines + bad
    rng.shuffle(mixed)
    for line in mixed:
        if line.startswith(b'{"id": "dup-'):
            record = json.loads(line)
            corpus.first_copies.setdefault(record["id"], record["text"])
    (folder / "mixed.jsonl").write_bytes(b"\n".join(mixed) + b"\n")

    with (folder / "big.jsonl").open("w") as f:
        size = int(big_mb * 1024 * 1024)
        sentence = SENTENCES[0] + " "
        f.write(json.dumps({"id": "big", "text": (sentence * (size // len(sentence) + 1))[:size]}) + "\n")
    corpus.valid_ids.add("big")

    with (folder / "tiny.jsonl").open("w") as f:
        for i in range(tiny):
            f.write(json.dumps({"id": f"t{i}", "text": "ok."}) + "\n")
    corpus.valid_ids.update(f"t{i}" for i in range(tiny))

    pq.write_table(pa.table({"id": ["w1", "w2"], "content": ["wrong column", "again"]}), folder / "wrong_schema.parquet")
    corpus.rejects += 1
    # good-0 again, in a later file: with several tasks another task reads it, and mixed.jsonl's copy is kept.
    pq.write_table(pa.table({"id": ["pq1", "pq2", "good-0"], "text": [SENTENCES[1], None, SENTENCES[2]]}),
                   folder / "nullable.parquet")
    corpus.valid_ids.add("pq1")
    corpus.rejects += 2
    corpus.duplicate_ids.add("good-0")
    corpus.first_copies["good-0"] = good_zero
    (folder / "cut.parquet").write_bytes((folder / "nullable.parquet").read_bytes()[:40])
    corpus.rejects += 1
    (folder / "blob.jsonl").write_bytes(os.urandom(4096))  # one binary "line" or several: count them
    corpus.rejects += sum(1 for line in (folder / "blob.jsonl").read_bytes().split(b"\n") if line.strip())
    return corpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output", type=Path)
    parser.add_argument("--big-mb", type=float, default=50.0)
    parser.add_argument("--tiny", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    corpus = write_corrupt_corpus(args.output, args.big_mb, args.tiny, args.seed)
    print(f"{args.output}: {len(corpus.valid_ids):,} valid ids, {corpus.rejects:,} rejects expected")


if __name__ == "__main__":
    main()
