"""Multiple-choice items read from their files, one item or one rejection per record.

Layouts read (`--format auto` picks one per file from its first record):
    aqua      AQuA-RAT: `question`, `options` ["A)…", …], `correct` letter
    mmlu_csv  hendrycks CSV: question, A, B, C, D, answer letter; with or without a header row
    jsonl     `question` + `options` (letter -> text, or a list) or `choices` (list), `answer` (letter or 0-based index)
    arc       ARC: `question` (text, or {stem, choices}), `choices` {text, label}, `answerKey`
    alpaca    `instruction` with the options inline ("Answer Choices: (A) …", "The options: A ) … , B ) …",
              "Answer1: …"), `answer` letter or "answerN" (the LLM-Adapters files: MathQA, AQuA, ARC)
Files may be JSON lines, one JSON array, CSV or parquet; `hf:NAME[:SPLIT]` reads a Hugging Face dataset.
"""

from __future__ import annotations

import csv
import glob as globlib
import json
import re
from collections.abc import Iterator
from pathlib import Path

from curate.builders.mcqa.items import FORMATS, LETTERS, FormatError, MCItem, Rejected
from curate.dataset_files import dataset_files


def _source_name(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}" if path.parent.name else path.stem


INPUT_SUFFIXES = (".json", ".jsonl", ".csv", ".parquet")


def input_files(path: str) -> list[Path]:
    """The files of one local input (dataset_files without curate's layout: a file, a glob's matches, or every
    .json/.jsonl/.csv/.parquet file at any depth of a folder, its data/, rejects/ and '_x' folders included, as the
    source files they are); FileNotFoundError when there is none."""
    if not globlib.has_magic(path) and not Path(path).expanduser().exists():
        raise FileNotFoundError(f"input {path!r} does not exist (give a file, a directory, a glob, or hf:NAME[:SPLIT])")
    files = dataset_files(path, suffixes=INPUT_SUFFIXES, layout=False)
    if not files:
        raise FileNotFoundError(f"no .json/.jsonl/.csv/.parquet files under {path!r}")
    return files


def iter_records(path: str) -> Iterator[tuple[str, int, object]]:
    """(source, position, record) for every record; a record that cannot be decoded is yielded as an
    Exception so that the caller can reject it with its position."""
    if path.startswith("hf:"):
        import datasets

        name, _, split = path.removeprefix("hf:").partition(":")
        dataset = datasets.load_dataset(name, split=split or "train", streaming=True)
        source = f"{name}/{split or 'train'}"
        for position, record in enumerate(dataset):
            yield source, position, record
        return
    for file in input_files(path):
        source = _source_name(file)
        suffix = file.suffix.lower()
        if suffix == ".csv":
            with file.open(newline="", encoding="utf-8") as f:
                for position, row in enumerate(csv.reader(f)):
                    if row:
                        yield source, position, row
        elif suffix == ".parquet":
            import pyarrow.parquet as pq

            position = 0
            for batch in pq.ParquetFile(file).iter_batches(batch_size=1000):
                for record in batch.to_pylist():
                    yield source, position, record
                    position += 1
        else:
            with file.open("rb") as f:
                head = f.read(4096).lstrip()
            if head.startswith(b"["):
                # A JSON array cannot be streamed with the standard library; these files are small.
                for position, record in enumerate(json.loads(file.read_text(encoding="utf-8"))):
                    yield source, position, record
            else:
                with file.open("rb") as f:
                    for position, line in enumerate(f):
                        if not line.strip():
                            continue
                        try:
                            yield source, position, json.loads(line)
                        except (json.JSONDecodeError, UnicodeDecodeError) as error:
                            yield source, position, ValueError(f"malformed_record: {error}")


ALPACA_MARKERS = re.compile(r"Answer Choices:|The options:|Answer1:|(?:^|\s)\(?A[\).:]\s", re.DOTALL)


def detect_format(record: object) -> str:
    if isinstance(record, list):
        return "mmlu_csv"
    if not isinstance(record, dict):
        raise FormatError(f"cannot detect the layout: a record is a {type(record).__name__}, not an object or a CSV "
                          "row")
    keys = set(record)
    if {"question", "options", "correct"} <= keys:
        return "aqua"
    if "answerKey" in keys or isinstance(record.get("question"), dict):
        return "arc"
    if "question" in keys and keys & {"options", "choices"} and keys & {"answer", "label", "answer_idx", "gold"}:
        return "jsonl"
    if "instruction" in keys and "answer" in keys and ALPACA_MARKERS.search(str(record["instruction"])):
        return "alpaca"
    raise FormatError(
        f"cannot detect the layout from the fields {', '.join(sorted(map(str, keys)))}; expected AQuA (question, "
        "options, correct), "
        "JSON (question, options|choices, answer), ARC (question, choices, answerKey), an MMLU CSV, or "
        "Alpaca (instruction with inline options, answer); pass --format"
    )


def _stable_id(source: str, position: int) -> str:
    return f"{source}:{position}"


def _letter_of(answer: object, labels: list[str]) -> str | None:
    """The gold letter from a letter, "(B)", "answer3" (1-based), an option label, or a 0-based index."""
    if isinstance(answer, bool) or answer is None:
        return None
    if isinstance(answer, int):
        return LETTERS[answer] if 0 <= answer < len(LETTERS) else f"#{answer}"
    text = str(answer).strip()
    if text in labels:
        return LETTERS[labels.index(text)]
    if m := re.fullmatch(r"answer\s*(\d+)", text, re.IGNORECASE):
        return LETTERS[int(m.group(1)) - 1] if 0 < int(m.group(1)) <= len(LETTERS) else f"#{text}"
    if m := re.fullmatch(r"\(?([A-Ja-j])\)?\.?", text):
        return m.group(1).upper()
    if text.isdigit():
        return LETTERS[int(text)] if int(text) < len(LETTERS) else f"#{text}"
    return None


def _options_from(value: object) -> tuple[dict[str, str], list[str]]:
    """Options as letter -> text, with the labels they had, from a dict, a list, or ARC's {text, label}."""
    if isinstance(value, dict) and "text" in value:
        texts, labels = list(value["text"]), [str(x) for x in value.get("label") or []]
        return {LETTERS[i]: str(t) for i, t in enumerate(texts[: len(LETTERS)])}, labels
    if isinstance(value, dict):
        return {str(k).strip().upper(): str(v) for k, v in value.items() if str(k).strip().upper() in LETTERS}, []
    if isinstance(value, list):
        if value and isinstance(value[0], dict) and "text" in value[0]:
            labels = [str(c.get("label", "")) for c in value]
            return {LETTERS[i]: str(c["text"]) for i, c in enumerate(value[: len(LETTERS)])}, labels
        options = {}
        for i, text in enumerate(value[: len(LETTERS)]):
            text = str(text)
            if m := re.match(r"\s*\(?([A-J])\)\s*(.*)", text, re.DOTALL):
                options[m.group(1)] = m.group(2)
            else:
                options[LETTERS[i]] = text
        return options, []
    return {}, []


INLINE_STYLES = [
    # (where the option list starts, how each option is introduced)
    (re.compile(r"\s*Answer Choices:\s*", re.IGNORECASE), re.compile(r"\(([A-J])\)\s*")),
    (re.compile(r"\s*The options:\s*", re.IGNORECASE), re.compile(r"(?:^|\s,\s)([A-J]) \)\s*")),
    (re.compile(r"\s*\n\s*Answer1:\s*"), re.compile(r"(?:^|\s)Answer(\d+):\s*")),
]


def split_inline_options(text: str) -> tuple[str, dict[str, str]]:
    """Stem and options from a text that lists its options inline; ({} when none are found)."""
    text = re.sub(r"^\s*Please choose the correct answer to the question:\s*", "", text)
    text = re.sub(r"\s*Answer format:.*$", "", text, flags=re.DOTALL)
    for start, marker in INLINE_STYLES:
        m = start.search(text)
        if not m:
            continue
        stem, listing = text[: m.start()], text[m.end():]
        if start.pattern.startswith(r"\s*\n\s*Answer1"):
            listing = "Answer1: " + listing
        elif quoted := re.findall(r"'([A-J]) \) (.*?)'(?:,|\])", listing):
            listing = " , ".join(f"{letter} ) {body}" for letter, body in quoted)  # a Python list printed as text
        parts = marker.split(listing)
        labels, bodies = parts[1::2], parts[2::2]
        options = {}
        for k, (label, body) in enumerate(zip(labels, bodies)):
            letter = LETTERS[int(label) - 1] if label.isdigit() else label
            if letter != LETTERS[k]:
                return text, {}
            options[letter] = body.strip().rstrip(",").strip()
        return stem.strip(), options
    return text, {}


def _csv_item(row: list[str], header: list[str] | None, source: str, position: int) -> MCItem | Rejected:
    if header:
        record = dict(zip(header, row))
        question = record.get("question", "")
        options = {h: record[h] for h in header if h in LETTERS and record.get(h, "").strip()}
        answer: object = record.get("answer", record.get("target", ""))
        if str(answer).strip().isdigit():
            answer = int(answer)
        letter = _letter_of(answer, [])
        return _make_item(record.get("id") or _stable_id(source, position), source, question, options, letter)
    if len(row) < 4:
        return Rejected(_stable_id(source, position), source, f"missing_options: a CSV row with {len(row)} columns")
    question, *texts, answer = row
    options = {LETTERS[i]: t for i, t in enumerate(texts) if t.strip()}
    return _make_item(_stable_id(source, position), source, question, options, _letter_of(answer, []))


def _make_item(item_id: object, source: str, question: object, options: dict[str, str],
               letter: str | None) -> MCItem | Rejected:
    item_id = str(item_id)
    if not isinstance(question, str) or not question.strip():
        return Rejected(item_id, source, "empty_question: no question text")
    options = {k: v for k, v in options.items() if isinstance(v, str) and v.strip()}
    if len(options) < 2:
        return Rejected(item_id, source, f"missing_options: {len(options)} non-empty option(s)")
    if letter is None:
        return Rejected(item_id, source, "missing_answer: no gold letter or index")
    if letter not in options:
        return Rejected(item_id, source, f"gold_not_in_options: gold {letter!r} but options {''.join(sorted(options))}")
    return MCItem(item_id, source, question.strip(), options, letter)


def record_to_item(record: object, fmt: str, source: str, position: int) -> MCItem | Rejected:
    default_id = _stable_id(source, position)
    if isinstance(record, Exception):
        return Rejected(default_id, source, str(record))
    if fmt == "mmlu_csv":
        if not isinstance(record, list):
            return Rejected(default_id, source, "malformed_record: not a CSV row")
        return _csv_item(record, None, source, position)
    if not isinstance(record, dict):
        return Rejected(default_id, source, f"malformed_record: a JSON {type(record).__name__}, not an object")
    item_id = record.get("id") if record.get("id") not in (None, "") else default_id
    if fmt == "aqua":
        options, _ = _options_from(record.get("options"))
        return _make_item(item_id, source, record.get("question"), options, _letter_of(record.get("correct"), []))
    if fmt == "arc":
        question = record.get("question")
        choices = record.get("choices")
        if isinstance(question, dict):
            choices = question.get("choices", choices)
            question = question.get("stem")
        options, labels = _options_from(choices)
        return _make_item(item_id, source, question, options,
                          _letter_of(record.get("answerKey", record.get("answer")), labels))
    if fmt == "jsonl":
        options, labels = _options_from(record.get("options", record.get("choices")))
        question = record.get("question")
        if not options and isinstance(question, str):
            question, options = split_inline_options(question)
        answer = next((record[k] for k in ("answer", "label", "answer_idx", "gold") if k in record), None)
        return _make_item(item_id, source, question, options, _letter_of(answer, labels))
    if fmt == "alpaca":
        instruction = record.get("instruction")
        if not isinstance(instruction, str):
            return Rejected(str(item_id), source, "empty_question: no instruction text")
        stem, options = split_inline_options(instruction)
        if options and "The options:" in instruction:
            # MathQA is lowercased and its options carry an upper-casing artifact ("DAtA inADEquAtE").
            options = {k: v.lower() for k, v in options.items()}
        return _make_item(item_id, source, stem, options, _letter_of(record.get("answer"), []))
    raise FormatError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


def read_items(path: str, fmt: str = "auto", limit: int = -1) -> Iterator[MCItem | Rejected]:
    """Every record of the input as an item or a rejection; the layout is detected per file for `auto`."""
    if fmt not in FORMATS:
        raise FormatError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    layouts: dict[str, str] = {}
    headers: dict[str, list[str] | None] = {}
    count = 0
    for source, position, record in iter_records(path):
        if 0 <= limit <= count:
            return
        if source not in layouts:
            layouts[source] = detect_format(record) if fmt == "auto" and not isinstance(record, Exception) else fmt
        layout = layouts[source]
        if layout == "auto":  # the first line of the file was unreadable: detect from the next one
            layouts.pop(source)
            yield record_to_item(record, "jsonl", source, position)
            count += 1
            continue
        if layout == "mmlu_csv" and isinstance(record, list):
            if source not in headers:
                lowered = [c.strip().lower() for c in record]
                headers[source] = lowered if "question" in lowered and "answer" in lowered else None
                if headers[source]:
                    headers[source] = [c if c not in ("a", "b", "c", "d", "e") else c.upper() for c in lowered]
                    continue
            yield _csv_item(record, headers[source], source, position)
        else:
            yield record_to_item(record, layout, source, position)
        count += 1
