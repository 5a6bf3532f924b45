"""Labeled (response, gold, correct?) pairs for the verifier audit, from any table or from the local real sets.

A source yields `Pair`s whose candidate is a whole model response, whose label is a reference judgment of
that response (a human's, or another grader's: which one is recorded as the source's `label_source`), and
whose extraction is the answer format the response was asked for. Every row that cannot become a pair is
kept with its reason.

- `table`: any jsonl/parquet; column names are options (response, gold, label, id, group).
- `gsm8k`: GSM8K `example_model_solutions.jsonl`: four model solutions per problem (6B/175B, fine-tuned and
  verifier-selected), labeled `is_correct` by OpenAI; the answer is the final `A: N` line.
- `skythought`: Sky-T1 evaluation outputs (MATH-500, AIME24, AMC23): one long trace per problem, gold `gt`,
  labeled `score` by Qwen2.5-Math's grader; the answer is the last `\\boxed{}`.
- `prm800k`: PRM800K stepwise-critic parquet: the human-preferred step path of each problem that reached the
  answer (`is_solution`), joined into one response. Positives only (no pair is labeled wrong), so only
  recall can be measured on it.
- `pairs`: the hand-built `{id, gold, candidate, equivalent}` file (bare answers).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from curate.errors import CurateError
from curate.handoff.verifier_audit import Pair, answer_type, json_lines, read_pairs
from curate.rewards.extract import DEFAULT, Extraction, extract_answer

FORMATS = ("auto", "pairs", "table", "gsm8k", "skythought", "prm800k")
GSM8K_ANSWER = DEFAULT  # its "A: N" line, as a trainer reads it (the default extraction reads GSM8K's lines)
GSM8K_GOLD = Extraction(markers=(), patterns=(r"^(?:####|A:)\s*(.+)$",))
PRM800K_ANSWER = Extraction(patterns=(r"#\s*Answer\s*\n+\s*(.+)",))
LABEL_SOURCES = {
    "pairs": "hand-built equivalence labels",
    "table": "the table's label column",
    "gsm8k": "OpenAI's is_correct (GSM8K example_model_solutions)",
    "skythought": "Qwen2.5-Math's grader (Sky-T1 evaluation score)",
    "prm800k": "PRM800K human step ratings (preferred path reaching the answer; positives only)",
}
_TRUE = {"true", "1", "yes", "correct", "y", "t"}
_FALSE = {"false", "0", "no", "incorrect", "wrong", "n", "f"}


class PairSourceError(CurateError, ValueError):
    pass


@dataclass
class PairSet:
    pairs: list[Pair]
    rejects: list[dict] = field(default_factory=list)
    format: str = ""
    label_source: str = ""
    paths: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Columns:
    """Column names of a `table` source."""

    response: str = "response"
    gold: str = "gold"
    label: str = "label"
    id: str | None = None
    group: str | None = None


def _records(path: Path):
    """(position, record or None, raw line when not JSON) over a jsonl or parquet file."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        position = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=2048):
            for record in batch.to_pylist():
                position += 1
                yield position, record, None
        return
    for position, line, record in json_lines(path):
        if isinstance(record, json.JSONDecodeError):
            yield position, None, line[:300]
        else:
            yield position, record, None


def _label(value) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, list) and len(value) == 1:
        return _label(value[0])
    if isinstance(value, str):
        text = value.strip().lower()
        return True if text in _TRUE else False if text in _FALSE else None
    return None


def _first(value):
    return value[0] if isinstance(value, list) and value else value


def detect_format(path: Path) -> str:
    """The source format from the file's first record."""
    for _, record, _ in _records(path):
        if not isinstance(record, dict):
            break
        keys = set(record)
        if {"gold", "candidate", "equivalent"} <= keys:
            return "pairs"
        if "ground_truth" in keys and any(k.endswith(("_finetuning", "_verification")) for k in keys):
            return "gsm8k"
        if {"gt", "code", "score"} <= keys:
            return "skythought"
        if {"instruction", "responses", "next_response", "is_solution"} <= keys:
            return "prm800k"
        return "table"
    raise PairSourceError(f"{path}: no record to read; give --pairs-format explicitly")


def read_pair_source(paths: list[str | Path], format: str = "auto", columns: Columns = Columns(),
                     extraction: Extraction = DEFAULT) -> PairSet:
    """Pairs from one or more files of one format. `extraction` applies to `table` sources (the format the
    responses were asked for); the ready readers know their own."""
    if format not in FORMATS:
        raise PairSourceError(f"unknown pair format {format!r}; choose one of {', '.join(FORMATS)}")
    files = [Path(p) for p in paths]
    for path in files:
        if not path.is_file():
            raise PairSourceError(f"{path} does not exist (--pairs takes jsonl or parquet files)")
    formats = {detect_format(p) if format == "auto" else format for p in files}
    if len(formats) != 1:
        raise PairSourceError(f"the --pairs files have different formats ({', '.join(sorted(formats))}); audit them "
                              "one format at a time")
    kind = formats.pop()
    result = PairSet([], [], kind, LABEL_SOURCES[kind], [str(p) for p in files])
    seen: set[str] = set()
    for path in files:
        if kind == "pairs":
            pairs, rejects = read_pairs(path)
            rejects = [{**r, "source": str(path)} for r in rejects]
        else:
            reader = {"table": lambda p: _table(p, columns, extraction), "gsm8k": _gsm8k, "skythought": _skythought,
                      "prm800k": _prm800k}[kind]
            pairs, rejects = reader(path)
        result.rejects += rejects
        for pair in pairs:
            if pair.id in seen:
                result.rejects.append({"source": str(path), "id": pair.id, "reason": f"duplicate id {pair.id}"})
                continue
            seen.add(pair.id)
            result.pairs.append(pair)
    return result


def _table(path: Path, columns: Columns, extraction: Extraction) -> tuple[list[Pair], list[dict]]:
    pairs, rejects = [], []
    for position, record, raw in _records(path):
        where = {"source": str(path), "line": position}
        if record is None:
            rejects.append({**where, "reason": "not JSON", "raw": raw})
            continue
        if not isinstance(record, dict):
            rejects.append({**where, "reason": "not an object"})
            continue
        missing = [c for c in (columns.response, columns.gold, columns.label) if record.get(c) is None]
        if missing:
            present = ", ".join(sorted(record))[:200]
            rejects.append({**where, "reason": f"missing column(s) {', '.join(missing)} (present: {present}); name "
                            "them with --response-key/--gold-key/--label-key"})
            continue
        response, label = _first(record[columns.response]), _label(record[columns.label])
        if not isinstance(response, str):
            rejects.append({**where, "reason": f"{columns.response} is not text"})
            continue
        if label is None:
            value = record[columns.label]
            rejects.append({**where, "reason": f"{columns.label}={value!r} is not a true/false label"})
            continue
        has_id = columns.id and record.get(columns.id) is not None
        pair_id = str(record[columns.id]) if has_id else f"{path.stem}/{position}"
        group = str(record[columns.group]) if columns.group and record.get(columns.group) is not None else None
        gold = record[columns.gold]
        pairs.append(Pair(pair_id, gold, response, label, answer_type(gold), extraction, group))
    return pairs, rejects


def _gsm8k(path: Path) -> tuple[list[Pair], list[dict]]:
    pairs, rejects = [], []
    for position, record, raw in _records(path):
        where = {"source": str(path), "line": position}
        if not isinstance(record, dict) or "ground_truth" not in record:
            rejects.append({**where, "reason": "not a GSM8K example_model_solutions record", "raw": raw})
            continue
        gold = extract_answer(record["ground_truth"], GSM8K_GOLD)
        if gold is None:
            rejects.append({**where, "reason": "ground_truth has no final 'A: N' (or '#### N') line"})
            continue
        for key in sorted(k for k in record if isinstance(record[k], dict) and "solution" in record[k]):
            solution, label = record[key].get("solution"), _label(record[key].get("is_correct"))
            if not isinstance(solution, str) or label is None:
                rejects.append({**where, "model": key, "reason": "solution or is_correct missing"})
                continue
            pairs.append(Pair(f"gsm8k/{position}/{key}", gold, solution, label, answer_type(gold), GSM8K_ANSWER,
                              f"gsm8k/{position}"))
    return pairs, rejects


def _skythought(path: Path) -> tuple[list[Pair], list[dict]]:
    pairs, rejects = [], []
    stem = path.stem.removeprefix("sky-t1-")
    for position, record, raw in _records(path):
        where = {"source": str(path), "line": position}
        if not isinstance(record, dict):
            rejects.append({**where, "reason": "not JSON", "raw": raw})
            continue
        trace, label, gold = _first(record.get("code")), _label(record.get("score")), record.get("gt")
        if not isinstance(trace, str) or label is None:
            rejects.append({**where, "reason": "needs code[0] (trace) and score[0] (label)"})
            continue
        if gold is None or not str(gold).strip():
            # The grader compared the prediction against this empty gold, so its label says nothing.
            rejects.append({**where, "reason": "empty gt: the reference label was graded against no gold"})
            continue
        pair_id = f"{stem}/{record.get('idx', position)}"
        pairs.append(Pair(pair_id, str(gold), trace, label, answer_type(gold), DEFAULT, pair_id))
    return pairs, rejects


def _prm800k(path: Path) -> tuple[list[Pair], list[dict]]:
    pairs, rejects = [], []
    per_problem: dict[str, int] = {}
    for position, record, _ in _records(path):
        if not isinstance(record, dict) or not record.get("is_solution"):
            continue  # intermediate steps are not responses
        steps = list(record.get("responses") or []) + [record.get("next_response") or ""]
        gold, problem = record.get("answer"), record.get("instruction") or ""
        where = {"source": str(path), "line": position}
        if not gold or not "".join(steps).strip():
            rejects.append({**where, "reason": "solution row without answer or steps"})
            continue
        if record.get("rating") is not None and record["rating"] < 0:
            rejects.append({**where, "reason": "last step rated -1"})
            continue
        number = per_problem.setdefault(problem, len(per_problem))
        pair_id = f"{path.name.split('.')[0]}/{number}/{position}"
        pairs.append(Pair(pair_id, str(gold), "\n".join(steps), True, answer_type(gold), PRM800K_ANSWER,
                          f"prm800k/{number}"))
    return pairs, rejects
