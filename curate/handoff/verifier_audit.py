"""Verifier audit: precision and recall of a reward's equivalence verdicts on labeled answer pairs.

Pairs are JSON lines `{id, gold, candidate, equivalent}` (optional `type`). The candidate is scored
the way a trainer scores a completion, through the registered reward, with bare answers accepted
(`BARE` extraction); pairs read from whole responses (`curate.handoff.pair_sources`) carry the extraction
their source's answer format needs instead. A verdict is True, False or None (could not be reached: timeout, unusable gold).
None on an equivalent pair counts as a miss: a trainer gives such a completion no reward.

Recall is the figure that matters for RL: a verifier that rejects correct answers punishes the
exploration RL depends on.
"""

from __future__ import annotations

import json
import re
import time
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from curate.files import atomic_path
from curate.rewards.equivalence import shared_checker
from curate.rewards.extract import BARE, Extraction
from curate.rewards.registry import get_reward

RECALL_FLOOR = 0.95


@dataclass
class Pair:
    id: str
    gold: object
    candidate: str
    equivalent: bool
    type: str
    extraction: Extraction | None = None  # None: the audit's (BARE for hand-built answer pairs)
    group: str | None = None  # pairs of one problem share a group; the bootstrap resamples groups


@dataclass
class Verdict:
    id: str
    verdict: bool | None
    equivalent: bool
    type: str
    seconds: float
    gold: object
    candidate: str


@dataclass
class Metrics:
    pairs: int = 0
    tp: int = 0
    fp: int = 0
    tn: int = 0
    fn: int = 0
    undecided: int = 0  # verdict None, whatever the label

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None

    @property
    def accuracy(self) -> float | None:
        return (self.tp + self.tn) / self.pairs if self.pairs else None

    def add(self, verdict: bool | None, equivalent: bool) -> None:
        self.pairs += 1
        if verdict is None:
            self.undecided += 1
        if equivalent:
            if verdict:
                self.tp += 1
            else:
                self.fn += 1
        elif verdict:
            self.fp += 1
        else:
            self.tn += 1

    def as_dict(self) -> dict:
        return {**asdict(self), "precision": self.precision, "recall": self.recall, "accuracy": self.accuracy}


@dataclass
class AuditResult:
    reward: str
    overall: Metrics
    by_type: dict[str, Metrics]
    verdicts: list[Verdict]
    rejects: list[dict] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def recall_warning(self) -> bool:
        return self.overall.recall is not None and self.overall.recall < RECALL_FLOOR

    def slowest(self, n: int = 5) -> list[Verdict]:
        return sorted(self.verdicts, key=lambda v: v.seconds, reverse=True)[:n]

    def errors(self) -> list[Verdict]:
        return [v for v in self.verdicts if bool(v.verdict) != v.equivalent]


_NUMBER = re.compile(r"^-?\d[\d,]*(?:\.\d+)?$")


def answer_type(gold: object) -> str:
    """A coarse answer type from the gold, for the per-type breakdown when a pair names none."""
    text = str(gold).strip()
    if isinstance(gold, dict):
        return "structured"
    if _NUMBER.match(text.replace(" ", "")):
        return "integer" if "." not in text else "decimal"
    if "%" in text:
        return "percentage"
    if "\\pm" in text or "±" in text:
        return "plus-minus"
    if re.search(r"\\text\{\s*[a-zA-Z]{2,}", text) and re.search(r"\d", text) or "^\\circ" in text:
        return "units"
    if "!" in text:
        return "factorial"
    if re.search(r"\\(?:le|ge|leq|geq|lt|gt)\b|[<>]", text):
        return "inequality"
    if "\\cup" in text or "infty" in text or re.match(r"^[\[(].*,.*[\])]$", text) and text[0] != text[-1]:
        return "interval"
    if "=" in text:
        return "equation"
    if "pmatrix" in text or "bmatrix" in text:
        return "matrix"
    if text.startswith("\\{") or "," in text:
        return "set/tuple"
    if re.fullmatch(r"[A-Za-z ]+|\\text\{[^}]*\}", text):
        return "text"
    if "frac" in text or re.fullmatch(r"-?\d+/\d+", text):
        return "fraction"
    return "expression"


def json_lines(path: str | Path) -> Iterator[tuple[int, str, object]]:
    """(line number from 1, the line without its newline, its value) for every non-blank line of a JSON-lines file;
    the value of a line that is not JSON is its json.JSONDecodeError, so that each reader decides whether such a
    line is fatal or a reject."""
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as error:
                value = error
            yield number, line.rstrip("\n"), value


def read_pairs(path: str | Path) -> tuple[list[Pair], list[dict]]:
    """Valid pairs and, for every line that is not one, its reason."""
    pairs, rejects = [], []
    seen: set[str] = set()
    for number, line, record in json_lines(path):
        if isinstance(record, json.JSONDecodeError):
            rejects.append({"line": number, "reason": f"not JSON: {record}", "raw": line})
            continue
        if not isinstance(record, dict):
            rejects.append({"line": number, "reason": "not a JSON object", "raw": line})
            continue
        missing = [k for k in ("gold", "candidate", "equivalent") if record.get(k) is None]
        if missing or not isinstance(record["equivalent"], bool) or not isinstance(record["candidate"], str):
            reason = f"missing {', '.join(missing)}" if missing else "equivalent must be true/false, candidate a string"
            rejects.append({"line": number, "reason": reason, "raw": record})
            continue
        pair_id = str(record.get("id", f"line-{number}"))
        if pair_id in seen:
            rejects.append({"line": number, "reason": f"duplicate id {pair_id}", "raw": record})
            continue
        seen.add(pair_id)
        pairs.append(Pair(pair_id, record["gold"], record["candidate"], record["equivalent"],
                          record.get("type") or answer_type(record["gold"])))
    return pairs, rejects


def run_audit(pairs: list[Pair], reward: str = "math", extraction: Extraction = BARE, threads: int | None = None,
              progress: bool = True) -> AuditResult:
    """Scores every pair through the registered reward, in threads (as trainers call rewards)."""
    from rich.progress import Progress

    scorer = get_reward(reward)

    def judge(pair: Pair) -> Verdict:
        started = time.perf_counter()
        value = scorer.score(pair.candidate, pair.gold, None, pair.extraction or extraction)
        verdict = None if value is None else value >= 1.0
        return Verdict(pair.id, verdict, pair.equivalent, pair.type, time.perf_counter() - started, pair.gold, pair.candidate)

    threads = threads or shared_checker().capacity
    shared_checker().warm(threads)
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool, \
            Progress(disable=not progress, transient=True) as bar:
        task = bar.add_task(f"audit {scorer.data_source}", total=len(pairs))
        verdicts = []
        for verdict in pool.map(judge, pairs):
            verdicts.append(verdict)
            bar.advance(task)
    overall = Metrics()
    by_type: dict[str, Metrics] = defaultdict(Metrics)
    for v in verdicts:
        overall.add(v.verdict, v.equivalent)
        by_type[v.type].add(v.verdict, v.equivalent)
    return AuditResult(scorer.data_source, overall, dict(sorted(by_type.items())), verdicts,
                       seconds=time.perf_counter() - started)


def write_verdicts(result: AuditResult, path: str | Path) -> Path:
    """One JSON line per pair: id, verdict (true/false/null), label, type, seconds; written whole."""
    path = Path(path)
    with atomic_path(path) as partial, open(partial, "w", encoding="utf-8") as out:
        out.writelines(json.dumps({"id": v.id, "verdict": v.verdict, "equivalent": v.equivalent, "type": v.type,
                                   "seconds": round(v.seconds, 4)}, ensure_ascii=False) + "\n" for v in result.verdicts)
    return path
