"""Multiple choice -> open answer.

Training on multiple choice teaches elimination instead of derivation. This module keeps only the
items whose stem stands without its options and whose gold option is a mathematical object that a
checker (math-verify) can grade uniquely, rewrites the stem for an open answer, and writes the rest
to rejects with the reason.

Layouts read (`--format auto` picks one per file from its first record):
    aqua      AQuA-RAT: `question`, `options` ["A)…", …], `correct` letter
    mmlu_csv  hendrycks CSV: question, A, B, C, D, answer letter; with or without a header row
    jsonl     `question` + `options` (letter -> text, or a list) or `choices` (list), `answer` (letter or 0-based index)
    arc       ARC: `question` (text, or {stem, choices}), `choices` {text, label}, `answerKey`
    alpaca    `instruction` with the options inline ("Answer Choices: (A) …", "The options: A ) … , B ) …",
              "Answer1: …"), `answer` letter or "answerN" (the LLM-Adapters files: MathQA, AQuA, ARC)
Files may be JSON lines, one JSON array, CSV or parquet; `hf:NAME[:SPLIT]` reads a Hugging Face dataset.

math-verify is called with its own SIGALRM timeouts off (they fail outside the main thread), through the shared
`curate.rewards.equivalence.parse_latex` / `verify_parsed`; each item's whole check is bounded here instead
(`call_bounded`): the sympy objects of one item's options are compared with each other and classified, which a
string-in, verdict-out worker cannot hand back.
"""

from __future__ import annotations

import atexit
import csv
import glob as globlib
import hashlib
import json
import logging
import multiprocessing
import re
import signal
import threading
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from curate.builders.base import Builder, BuildOutput, Decision, Keep, Reject
from curate.builders.jobs import McqaJob
from curate.builders.llm_writers import PROMPT_VERSION, LLMOptions, Rewrite, reformulate_rows
from curate.data_cards.cards import (
    load_snippet,
    render_card,
    reproduce_command,
    save_card,
    size_category,
    split_configs,
)
from curate.dataset_files import dataset_files
from curate.errors import CurateError, InputError, OptionError
from curate.files import write_text_atomic
from curate.pipelines.decontam import decontaminate_dataset, parse_against
from curate.pipelines.dedup import dedup_dataset
from curate.pipelines.state import files_signature, write_once
from curate.rewards.equivalence import parse_latex, verify_parsed

DATA_SOURCE = "curate/mcqa_open"
ABILITY = "math"
FORMATS = ("auto", "aqua", "mmlu_csv", "jsonl", "arc", "alpaca")
LETTERS = "ABCDEFGHIJ"
ITEM_SECONDS = 10.0

# math-verify warns on every call made with its timeouts off; we bound time ourselves.
logging.getLogger("math_verify").setLevel(logging.ERROR)


class FormatError(CurateError, ValueError):
    """The input's layout could not be recognised."""


class CheckTimeout(Exception):
    pass


@dataclass
class MCItem:
    id: str
    source: str
    question: str
    options: dict[str, str]
    gold_letter: str


@dataclass
class Rejected:
    id: str
    source: str
    reason: str


@dataclass
class Converted:
    id: str
    source: str
    question: str
    answer: str
    answer_type: str
    original_options: list[dict]
    gold_letter: str

    def row(self) -> dict:
        return {
            "id": self.id, "question": self.question, "answer": self.answer, "answer_type": self.answer_type,
            "source": self.source, "original_options": self.original_options, "gold_letter": self.gold_letter,
            "data_source": DATA_SOURCE, "ability": ABILITY,
        }


# ----------------------------------------------------------------------------------------------
# Readers


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


def output_identity(inputs: list[str], fmt: str, limit: int, reformulate: dict | None, dedup: bool,
                    decontam: str | None, benchmarks_dir) -> tuple[dict, list]:
    """What decides the dataset `run_mcqa` writes (its parameters, and the size and mtime of each local input
    file; a hub input by name), as the CLI and the flow both claim the output folder with it."""
    from dataclasses import asdict


    parameters = {"inputs": list(inputs), "format": fmt, "limit": limit, "dedup": dedup, "decontam": decontam,
                  "benchmarks_dir": str(benchmarks_dir) if benchmarks_dir else None,
                  # every LLM field with its default, however it was given
                  "reformulate": asdict(LLMOptions(**reformulate)) if reformulate else None}
    signature = [i if i.startswith("hf:") else files_signature(input_files(i)) for i in inputs]
    return parameters, signature


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
        raise FormatError(f"cannot detect the layout: a record is a {type(record).__name__}, not an object or a CSV row")
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
        f"cannot detect the layout from the fields {', '.join(sorted(map(str, keys)))}; expected AQuA (question, options, correct), "
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


def _make_item(item_id: object, source: str, question: object, options: dict[str, str], letter: str | None) -> MCItem | Rejected:
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
        return _make_item(item_id, source, question, options, _letter_of(record.get("answerKey", record.get("answer")), labels))
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


# ----------------------------------------------------------------------------------------------
# Rules: does the stem stand without its options?

STEM_RULES: list[tuple[str, re.Pattern]] = [
    ("stem_depends_on_options", re.compile(
        r"\b(which|what)\s+(one\s+)?(of|among)\s+(the|these|those)\b|\bwhich\s+(one\s+)?of\b|\bamong the following\b"
        r"|\bof the following\b|\bthe following (is|are|statements?|could|would|must|best|represents?)\b"
        r"|\b(all|none|each) of the following\b|\bwhich statements?\b|\bwhich (one|choice|option|answer)\b", re.IGNORECASE)),
    ("stem_depends_on_options", re.compile(
        r"\b(options?|choices?|answers?)\s*\(?[A-E]\)?\s*(and|or|,)|\b(option|choice)s?\s+\(?[A-E]\)?\b|\(\s*[A-E]\s*\)\s*(and|or)\s*\(\s*[A-E]\s*\)"
        r"|\b(given|above|below|listed)\s+(options|choices|answers)\b|\b(options|choices) (above|below|given)\b", re.IGNORECASE)),
    ("stem_depends_on_options", re.compile(r"\bEXCEPT\b|\bexcept\s*(:|\?|$)|\bis not true\b|\bis false\b|\btrue or false\b", re.IGNORECASE)),
    ("stem_depends_on_options", re.compile(
        r"(^|[.?!:;,\n]\s*|\b(then|so|and)\s+)which\s+(?!is\b|are\b|was\b|were\b|has\b|have\b)|(^|[.?!:;\n]\s*)which\b"
        r"|\bmost likely\b|\bbest (describes?|explains?|represents?|supported|supports)\b|\b(could|might|can|may) be\b\s*(\?|:|$)|\bcould\s+(be|equal)\b", re.IGNORECASE)),
    ("paired_statements", re.compile(r"Statement\s*1\s*\|?|\b(I|II|III)\.\s|\bI\s+only\b|\bII\s+and\s+III\b", re.DOTALL)),
]
APPROXIMATE = re.compile(
    r"\b(approximately|approximate|approx\.?|closest to|nearest to|roughly|estimated?|about how)\b", re.IGNORECASE)
STATED_PRECISION = re.compile(
    r"nearest\s+(whole|integer|tenth|hundredth|thousandth|cent|dollar|percent|degree|\w+\s+place)|decimal places?|significant (figures|digits)", re.IGNORECASE)
META_GOLD = re.compile(
    r"^\s*(all|none|both|neither)\s+(of\s+)?(the\s+)?(above|these|them|those)\b|^\s*none\s*$|\bcan ?not be determined\b"
    r"|\bcannot be determined\b|\bdata (inadequate|insufficient)\b|\bnot enough information\b|\binsufficient (data|information)\b"
    r"|\bmore than one\b|^\s*([A-E]|I{1,3}|IV)(\s*(,|and|&|or)\s*([A-E]|I{1,3}|IV))+\s*(only)?\s*$|^\s*(I{1,3}|IV)\s+only\s*$", re.IGNORECASE)


# A stem that asks nothing: no question mark and no instruction ("A curve is given parametrically by the
# equations"), usually cut off in the source or meant to be completed by an option.
ASKS = re.compile(
    r"\?|\b(what|how|which|who|whom|whose|when|where|why|find|calculate|compute|determine|evaluate|solve|simplify|"
    r"give|express|estimate|write|convert|factor|factorise|factorize|expand|round|state|name|identify|list|show|prove|"
    r"derive|rationali[sz]e|add|subtract|multiply|divide)\b", re.IGNORECASE)
# "... the length of the garden is :" asks for the value it names (a completion stem), unlike a sentence cut off.
COMPLETION = re.compile(r"\b(is|are|was|were|be|equals?|equal to|becomes?|amounts? to|costs?)\s*[:\-.\s]*$", re.IGNORECASE)
ENDS_SENTENCE = re.compile(r"[.?!)\]}$\"'”’]\s*$")
# Motion under gravity with no value for g: the gold then encodes the writer's choice (9.8 or 10 m/s^2).
GRAVITY_MOTION = re.compile(
    r"\b(dropped|falls?|falling|fell|thrown|projectile|free[- ]fall|freely|gravity|gravitational acceleration|"
    r"vertically upwards?|pendulum|inclined plane|incline)\b", re.IGNORECASE)
# Found in the read sample (bench/mcqa_read_sample.jsonl): a kicked ball's flight time, a motor lifting a mass, an
# accelerating elevator's apparent weight, the share of a floating body weighed in newtons all use the writer's g.
# Narrow on purpose: an escalator's 'staircase elevator', people's weight in an elevator, a boat floating on a lake
# (density alone) and a steamer's float need no g.
GRAVITY_FORCE = re.compile(
    r"\bkicked\b|\blaunch(?:ed)? (?:angle|speed|velocity)\b|\blift(?:s|ing|ed)?\b[^.?!]*\b(?:kg|kilograms?)\b"
    r"|\belevator\b[^.?!]*\baccelerat|\bapparent weight\b|\bfloat(?:s|ing)?\b(?=.*\d\s*N\b)|\d\s*N\b(?=.*\bfloat)", re.IGNORECASE | re.DOTALL)
GRAVITY_GIVEN = re.compile(
    r"\bg\s*=|9\.8|\b10\s*m\s*/\s*s(\^?2|²)|acceleration (due to|of) gravity (is|of|=|as)|\btake g\b", re.IGNORECASE)
# Questions about how a number is written, not its value.
FORM_ASKED = re.compile(
    r"\b(expanded|standard|word|exponential|exponent|factored|scientific) (form|notation)\b|\bprime factori[sz]ation\b"
    r"|\bfactori[sz]e\b|\busing (exponents|powers)\b|\b(which|what) expression\b|\bexpressions? (that |which )?"
    r"(shows?|represents?|can be used|could be used|is equivalent)\b|\bone way to\b|\bas a (product|sum) of\b", re.IGNORECASE)
# Numbers joined by operators, nothing else: a value written out, whose form a value checker does not see.
CONSTANT_ARITHMETIC = re.compile(
    r"[\d.\s(){}]*\d[\d.\s(){}]*(?:(?:[-+*^!]|\\times|\\cdot|\\div)[\d.\s(){}!]*)+")
# A clock time ("14 : 00", "3:58 p.m."): the reward compares numbers and ratios, so "2 pm" and "3:58 pm" scored 0.
TIME_OF_DAY = re.compile(r"\s*\d{1,2}\s?:\s?\d{2}\s*(?P<half>[ap]\.?\s?m\b\.?)?\s*", re.IGNORECASE)
ASKS_TIME = re.compile(r"\bwhat time\b|\bclocks?\b|o'\s?clock|\b[ap]\.m\b", re.IGNORECASE)
PAIR_DASH = re.compile(r"\s*\d[\d.,]*\s+-\s+\d[\d.,]*\s*")
# A polynomial ring over Z_n: its elements have many spellings (-3 is 5 in Z_8) that no checker over Q equates.
MODULAR_RING = re.compile(r"\bZ_?\{?\d+\}?\s*\[\s*[a-z]\s*\]")
# Options that point at other options: meaningful only next to them.
TOGETHER = re.compile(
    r"\b(both|all|none|neither)\s+(of\s+)?(the\s+)?(above|these|them|those)\b|\bboth\s+\(?[A-E]\)?\s+and\s+\(?[A-E]\)?"
    r"|^\s*\(?[A-E]\)?\s+(and|or|&)\s+\(?[A-E]\)?\s*$|\bneither\s+\(?[A-E]\)?\s+nor\s+\(?[A-E]\)?|^\s*none\s*$", re.IGNORECASE)


def truncated_reason(stem: str) -> str | None:
    text = re.sub(r"\s+", " ", stem).strip()
    if COMPLETION.search(text):
        return None
    if not ASKS.search(text):
        return f"truncated_stem: no question or instruction in {text[-40:]!r}"
    last_sentence = re.split(r"(?<=[.?!])\s+", text)[-1]
    if not ENDS_SENTENCE.search(text) and not ASKS.search(last_sentence):
        return f"truncated_stem: ends mid-sentence {text[-40:]!r}"
    return None


def unstated_constant_reason(stem: str, options: dict[str, str]) -> str | None:
    """g that the stem never gives, flagged when the options carry numbers (and so the writer's value of g)."""
    if not (GRAVITY_MOTION.search(stem) or GRAVITY_FORCE.search(stem)) or GRAVITY_GIVEN.search(stem):
        return None
    numeric = [text for text in options.values() if re.search(r"\d", text)]
    if numeric:
        return "unstated_constant: motion under gravity and no value of g in the question, numeric options"
    return None


def stem_reason(stem: str) -> str | None:
    for reason, pattern in STEM_RULES:
        if m := pattern.search(stem):
            return f"{reason}: {m.group(0).strip()!r}"
    if reason := truncated_reason(stem):
        return reason
    if (m := APPROXIMATE.search(stem)) and not STATED_PRECISION.search(stem):
        return f"approximate_answer: {m.group(0)!r} with no stated precision"
    return None


# ----------------------------------------------------------------------------------------------
# Answers: option text -> LaTeX that math-verify parses

NUMBER_WORDS = {w: str(i) for i, w in enumerate([
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen",
    "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"])}
UNITS = sorted({
    "km/hr", "km/h", "kmph", "kmh", "km/hour", "m/s", "m/sec", "mph", "km", "cm", "mm", "m", "kg", "g", "gm", "gms", "mg",
    "l", "ml", "litres", "liters", "litre", "liter", "hours", "hour", "hrs", "hr", "minutes", "minute", "min", "mins",
    "seconds", "second", "sec", "secs", "s", "days", "day", "weeks", "week", "months", "month", "years", "year", "yrs",
    "miles", "mile", "feet", "foot", "ft", "inches", "inch", "in", "yards", "yd", "meters", "metres", "meter", "metre",
    "sq m", "sq cm", "sq km", "sq ft", "sq units", "sq. m", "sq. cm", "sq. units", "m^2", "cm^2", "m^3", "cm^3", "cu m", "cu cm",
    "cubic meters", "cubic cm", "square units", "units", "unit", "h", "rupees", "dollars", "cents", "paise", "degrees", "°",
    "n", "j", "kj", "w", "kw", "v", "ohm", "ohms", "hz", "khz", "pa", "kpa", "atm", "mol", "k", "ev", "°c", "°f",
    "m/s^2", "km^2", "mm^2", "mm^3", "ft^2", "ft^3", "in^2", "km/s", "kg/m^3", "g/cm^3", "kg m/s", "n/m", "c", "men", "women", "boys", "girls", "students", "persons", "people", "workers",
    "children", "balls", "marbles", "apples", "books", "pages", "votes", "times", "steps", "revolutions", "rounds",
    "rs", "rs.", "games", "matches", "employees", "members", "players", "trees", "cows", "ways", "seats", "tickets", "items",
}, key=len, reverse=True)
UNIT_RE = re.compile(r"^(?P<value>.*?[\d}\)a-z])\s*(?P<unit>" + "|".join(re.escape(u) for u in UNITS) + r")\.?$", re.IGNORECASE)
# SI units with an optional prefix, matched case-sensitively ("mm" is not "Mm", "ms" not "Ms"): "50 μN", "2.5 ns",
# "42.58 MHz", "2 A", "2.9 T". Only after a space: "3kT" is k times T and "4F" four times F; and "7 pm" is a time.
SI_BASE = r"(?:mol|Hz|Pa|eV|Wb|Ω|[mgsAVWJNCFTLK])"
SI_UNIT_RE = re.compile(
    r"^(?P<value>.*?[\d}\)])\s+(?!pm$|am$)(?P<unit>[pnμmcdkMGT]?" + SI_BASE + r"(?:\^?[23])?(?:/[a-zA-Z]+(?:\^?[23])?)*)$")
# Digit groups: a first group of 1-3 digits (not led by 0), then ",ddd" groups; MathQA spaces the first comma
# ("3 , 012,121"), and a group so written counts only when an unspaced one follows ("4 , 2" is a pair).
DIGIT_GROUPS = re.compile(r"(?<![\d.,])[1-9]\d{0,2}(?: , \d{3}(?=,\d{3}))?(?:,\d{3})+(?![\d]|,\d)")
TRAILING_CURRENCY = re.compile(r"(?<=\d)\s*(?:\\?\$|€|£|¥)$")
# Element symbols, to tell a nuclide or formula ("2H", "14N", "6Li", "C3H6O") from a quantity with a unit.
ELEMENTS = frozenset(re.findall(r"[A-Z][a-z]?", (
    "HHeLiBeBCNOFNeNaMgAlSiPSClArKCaScTiVCrMnFeCoNiCuZnGaGeAsSeBrKrRbSrYZrNbMoTcRuRhPdAgCdInSnSbTeIXeCsBaLaCePrNdPmSm"
    "EuGdTbDyHoErTmYbLuHfTaWReOsIrPtAuHgTlPbBiPoAtRnFrRaAcThPaUNpPuAmCmBkCfEsFmMdNoLr")))
MICRO_SYMBOL = re.compile(r"μ(?!" + SI_BASE + r"(?:/\S+)?\s*$)")
CHEMICAL = re.compile(r"^\s*\d{0,3}((?:[A-Z][a-z]?\d*)+)[+-]?\s*$")
CURRENCY_RE = re.compile(r"^\s*(?:\\?\$|rs\s*\.?|inr|usd|€|£|¥)\s*", re.IGNORECASE)
GREEK = {"α": "alpha", "β": "beta", "γ": "gamma", "δ": "delta", "Δ": "Delta", "θ": "theta", "λ": "lambda", "μ": "mu",
         "ρ": "rho", "σ": "sigma", "τ": "tau", "φ": "phi", "ω": "omega", "Ω": "Omega"}


CONSTANTS = {"g", "c", "e"}  # gravity, light speed, Euler's number: symbols an answer may use unannounced
MATH_WORDS = {"sqrt", "frac", "dfrac", "tfrac", "pi", "sin", "cos", "tan", "cot", "sec", "csc", "log", "ln", "exp",
              "lim", "arcsin", "arccos", "arctan", "times", "cdot", "div", "le", "ge", "leq", "geq", "ne", "neq", "infty",
              "cup", "cap", "in", "left", "right", "begin", "end", "pmatrix", "bmatrix", "matrix", "text", "mathrm",
              "circ", "pm", "mp", "approx", *GREEK.values()}


@dataclass
class Answer:
    latex: str
    parsed: list = field(repr=False)
    answer_type: str
    unit: str | None = None


def _unicode_math(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)  # also the micro sign µ to the letter μ
    # "5 ⁄ 3" (the fraction slash NFKC makes of "⅓") and "2^4 • 3" were read by math-verify as "3" and "3"
    for a, b in {"–": "-", "—": "-", "−": "-", "×": r" \times ", "÷": r" \div ", "·": r" \cdot ", "•": r" \cdot ",
                 "∙": r" \cdot ", "⋅": r" \cdot ", "⁄": "/", "∕": "/", "π": r"\pi ", "∞": r"\infty ", "≤": r" \le ",
                 "≥": r" \ge ", "≠": r" \ne ", "∪": r" \cup ", "°": "°"}.items():
        text = text.replace(a, b)
    # μ is the micro prefix of a unit that ends the text ("50 μN", "160 μF"), the symbol mu elsewhere
    text = MICRO_SYMBOL.sub(r"\\mu ", text)
    for a, b in GREEK.items():
        if a != "μ":
            text = text.replace(a, "\\" + b + " ")
    text = re.sub(r"√\s*\(([^()]*)\)", r"\\sqrt{\1}", text)
    text = re.sub(r"√\s*\{([^{}]*)\}", r"\\sqrt{\1}", text)
    text = re.sub(r"√\s*([\d.]+|[a-zA-Z])", r"\\sqrt{\1}", text)
    text = re.sub(r"\^\s*\(?\s*(-\s*\d+(?:\.\d+)?)\s*\)?", lambda m: "^{" + m.group(1).replace(" ", "") + "}", text)
    return text


def normalize_option(text: str, variables: frozenset[str] = frozenset(),
                     subscripts: frozenset[str] = frozenset()) -> tuple[str | None, dict]:
    """LaTeX for an option's value, and what was stripped (`percent`, `unit`, `currency`); None and a
    `reason` in the dict when the option is not a mathematical object. `variables` are the single
    letters the stem uses as symbols, so that "xp" reads as a product rather than a word; `subscripts` the
    letter-digit names it uses ("v0", "x1"), which an option's "v0" then means."""
    info: dict = {}
    s = _unicode_math(text).strip().rstrip(".").strip()
    if s.startswith("$") and s.endswith("$") and s.count("$") == 2:
        s = s[1:-1].strip()
    if (m := CHEMICAL.fullmatch(s)) and set(re.findall(r"[A-Z][a-z]?", m.group(1))) <= ELEMENTS \
            and not set(re.findall(r"[a-zA-Z]", m.group(1))) <= variables:
        # "2H" (deuterium) was read as 2 hours: a nuclide or a formula names a substance, not a quantity
        info["reason"] = f"chemical_symbol: {s[:20]!r} names a nuclide or compound"
        return None, info
    if CURRENCY_RE.match(s) and re.search(r"\d", s):
        s = CURRENCY_RE.sub("", s, count=1)
        info["currency"] = True
    elif TRAILING_CURRENCY.search(s):
        s = TRAILING_CURRENCY.sub("", s)  # "88,000$"
        info["currency"] = True
    # Before the units and the sets: "1 / 40,000", "(3,034, 3,466)", "3 , 012,121" each hold one number per group.
    s = DIGIT_GROUPS.sub(lambda m: m.group(0).replace(" , ", "").replace(",", ""), s)
    if s.lower() in NUMBER_WORDS:
        s = NUMBER_WORDS[s.lower()]
    # "9.8 m/s2", "20 cm3" (also m/s², NFKC-folded to 2): the power of a unit, not a subscript.
    s = re.sub(r"(?<=\s)((?:m/s|cm|mm|km|ft|in|m|kg/m|g/cm))\s*\^?\s*([23])$", r"\1^\2", s)
    if m := re.fullmatch(r"(.*?)\s*(\\?%|percent|per cent)", s, re.IGNORECASE):
        s = m.group(1).strip()
        info["percent"] = True
    elif (m := UNIT_RE.match(s)) and not re.search(r"[a-zA-Z]", re.sub(r"\\[a-zA-Z]+", "", m.group("value"))):
        unit = m.group("unit")
        plain_number = re.fullmatch(r"-?[\d.,]+", m.group("value").strip())
        # Glued to the number, a single letter is a unit only in lower case (and litre's L): "2H" is not 2 hours.
        if len(unit) > 1 or re.search(r"\s" + re.escape(unit) + r"\.?$", s) or (plain_number and unit in "mgshlL°"):
            # "130°" kept its sign, and the reward then gave 0 to 130 and to 130^\circ (found in the read sample)
            s, info["unit"] = m.group("value").strip(), "degrees" if unit == "°" else unit
    elif (m := SI_UNIT_RE.match(s)) and not re.search(r"[a-zA-Z]", re.sub(r"\\[a-zA-Z]+", "", m.group("value"))) \
            and not (len(m.group("unit")) == 1 and m.group("unit") in variables):
        s, info["unit"] = m.group("value").strip(), m.group("unit")
    s = re.sub(r"\s+", " ", s).strip()
    if re.fullmatch(r"[^a-zA-Z]+( and [^a-zA-Z]+)+", s):
        s = r"\{" + s.replace(" and ", ", ") + r"\}"
    if m := re.fullmatch(r"(-?)(\d+)\s+(\d+)\s*/\s*(\d+)", s):
        whole, num, den = int(m.group(2)), int(m.group(3)), int(m.group(4))
        s = f"{m.group(1)}\\frac{{{whole * den + num}}}{{{den}}}"
    s = re.sub(r"(?<=\d) (?=\d)", "", s) if re.fullmatch(r"-?[\d ]+(\.\d+)?", s) else s
    s = re.sub(r"(?<=\d) \.(?= ?\d)", ".", s).replace(". ", ".") if re.fullmatch(r"-?\s*\d+ ?\. ?\d+", s) else s
    if not s:
        info["reason"] = "gold_not_math: empty after removing units"
        return None, info
    words = [w for w in re.findall(r"(?<!\\)\b[a-zA-Z]{2,}\b", re.sub(r"\\[a-zA-Z]+", " ", s)) if w.lower() not in MATH_WORDS and not set(w) <= variables]
    if words:
        info["reason"] = f"gold_not_math: words {' '.join(words[:4])!r}"
        return None, info
    bare = re.sub(r"\\[a-zA-Z]+", " ", s)
    if re.search(r"[a-zA-Z]\s+[a-zA-Z]\s+[a-zA-Z]", bare):
        info["reason"] = "gold_not_math: a run of letters"
        return None, info
    if re.search(r"[a-zA-Z][\w_]*\s*:", bare):
        info["reason"] = "gold_not_math: labelled parts"
        return None, info
    if ";" in bare:
        # "μ = 15,300; σ = 6300", "18 = p - 4; 22": several answers, of which math-verify grades one
        info["reason"] = "gold_not_math: several parts"
        return None, info
    if m := re.search(r"\d\s+[a-zA-Z]\s+\d", s):
        # MathQA's "10 v 2" is 10√2, "2 x 3" a times sign: read as a product with a symbol, both are wrong (on the
        # LaTeX, not on `bare`: in "2 \le y \le 8" the y stands between relations)
        info["reason"] = f"gold_not_math: a letter between two numbers {m.group(0)!r}"
        return None, info
    if stray := set(re.findall(r"[a-zA-Z]", bare)) - variables - CONSTANTS:
        # A letter the stem never uses as a symbol is a label or a garbled word ("s : 1300", "C1: (3,3)").
        info["reason"] = f"gold_not_math: symbol {''.join(sorted(stray))!r} not in the question"
        return None, info
    for name in re.findall(r"(?<![\\a-zA-Z])[a-zA-Z]\d(?!\d)", s):
        if name not in subscripts:
            # "3D/(M2-3M)" means M^2 (AQuA writes powers flat); only a name the stem itself uses is a subscript
            info["reason"] = f"ambiguous_symbol: {name!r} is {name[0]}_{name[1]} or {name[0]}^{name[1]}, not named in the question"
            return None, info
    s = re.sub(r"(?<![\\a-zA-Z])([a-zA-Z])(\d)(?!\d)", r"\1_\2", s)  # v0 is v_0, not v times 0
    if (m := re.fullmatch(r"([a-zA-Z])\s*=\s*([^=<>]+)", s)) and not re.search(r"[a-zA-Z]", re.sub(r"\\[a-zA-Z]+", "", m.group(2))):
        # "e = 121" (e was read as Euler's number, and the equation as False), "t = 32": the value asked for
        s = m.group(2).strip()
    return s, info


def answer_type_of(parsed: object, latex: str, info: dict) -> str:
    import sympy

    if info.get("percent"):
        return "percentage"
    if isinstance(parsed, sympy.MatrixBase):
        return "matrix"
    if isinstance(parsed, sympy.Interval | sympy.Union):
        return "interval"
    if isinstance(parsed, sympy.FiniteSet):
        return "set"
    if isinstance(parsed, sympy.Tuple | tuple):
        return "tuple"
    if isinstance(parsed, sympy.Rel):
        return "equation"
    if isinstance(parsed, sympy.Integer):
        return "integer"
    if isinstance(parsed, sympy.Float) or (isinstance(parsed, sympy.Rational) and "." in latex and "frac" not in latex):
        return "decimal"
    if isinstance(parsed, sympy.Rational):
        return "fraction"
    if isinstance(parsed, sympy.Basic) and not parsed.free_symbols and parsed.has(sympy.sqrt(2).func) and any(
        isinstance(p, sympy.Pow) and p.exp.is_Rational and not p.exp.is_integer for p in sympy.preorder_traversal(parsed)
    ):
        return "radical"
    return "expression"


def stem_variables(stem: str) -> frozenset[str]:
    """Single letters the stem uses as symbols (also as v0, x_1, 2x), for telling products from words."""
    return frozenset(re.findall(r"(?<![a-zA-Z'])([b-zB-HJ-Z])(?=[\d_^]|(?![\w']))", _unicode_math(stem).replace("\\", " ")))


def stem_subscripts(stem: str) -> frozenset[str]:
    """Letter-digit names the stem uses ("v0", "x1", "T2"): an option's "v0" is then v_0."""
    return frozenset(re.findall(r"(?<![a-zA-Z\d])[a-zA-Z]\d(?![\w])", _unicode_math(stem)))


def parse_answer(text: str, variables: frozenset[str] = frozenset(), subscripts: frozenset[str] = frozenset()) -> Answer | str:
    """The option as a gradable answer, or the reason it is not one."""
    latex, info = normalize_option(text, variables, subscripts)
    if latex is None:
        return info["reason"]
    if info.get("percent"):
        latex += r"\%"  # parsed with its percent sign, math-verify accepts 25 and 0.25 for a gold of 25 %
    parsed = parse_latex(latex)
    if not parsed:
        return f"gold_not_math: math-verify cannot parse {latex[:40]!r}"
    extracted = str(parsed[-1])
    if len(re.sub(r"\s", "", extracted)) < 0.8 * len(re.sub(r"\s|\\left|\\right", "", latex)):
        return f"gold_not_math: only {extracted[:30]!r} of {latex[:40]!r} parses"
    return Answer(extracted, parsed, answer_type_of(parsed[0], latex, info), info.get("unit"))


# ----------------------------------------------------------------------------------------------
# Stem rewrite

# Counted things and currencies: the stem already says what is counted or paid.
UNITS_WITHOUT_INSTRUCTION = {"men", "women", "boys", "girls", "students", "persons", "people", "workers", "children",
                             "times", "ways", "units", "unit", "rs", "rs.", "rupees", "dollars", "cents", "paise", "balls",
                             "marbles", "apples", "books", "pages", "votes", "steps", "games", "matches", "employees",
                             "members", "players", "trees", "cows", "seats", "tickets", "items", "revolutions", "rounds"}
INSTRUCTIONS = {
    "percentage": "Express your answer as a percentage.",
    "fraction": "Express your answer as a common fraction.",
    "radical": "Express your answer in simplest radical form.",
    "interval": "Express your answer in interval notation.",
    "set": "Give all values, separated by commas.",
    "tuple": "Express your answer as an ordered tuple.",
    "equation": "Express your answer as an equation.",
    "matrix": "Express your answer as a matrix.",
}


def rewrite_stem(stem: str, answer: Answer) -> str:
    stem, _ = split_inline_options(stem)
    stem = re.sub(r"\s*(Answer Choices|Options|Choices)\s*:.*$", "", stem, flags=re.DOTALL | re.IGNORECASE).strip()
    stem = re.sub(r"\s+([?.,])", r"\1", stem) if " ?" in stem or " ," in stem else stem
    if stem and stem[0].islower():
        stem = stem[0].upper() + stem[1:]
    extra = []
    if answer.answer_type in INSTRUCTIONS:
        instruction = INSTRUCTIONS[answer.answer_type]
        if answer.answer_type == "tuple" and len(answer.parsed[0]) == 2:
            instruction = "Express your answer as an ordered pair."
        extra.append(instruction)
    if answer.unit and answer.unit.lower() not in UNITS_WITHOUT_INSTRUCTION:
        extra.append(f"Express your answer in {answer.unit}.")
    return " ".join([stem, *extra]).strip()


def _decimals(number: str) -> int:
    return len(number.partition(".")[2])


def rounded_reason(stem: str, answer: Answer) -> str | None:
    """A gold that is probably a rounding of the true value: a checker comparing to six places would
    then reject a model's exact answer. Scientific notation (significant figures) and decimals with
    more places than any number in the stem count as rounded unless the stem states the precision."""
    if STATED_PRECISION.search(stem):
        return None
    if re.search(r"\\times\s*10\^|\d[eE][-+]?\d", answer.latex) or "10^" in answer.latex:
        return f"rounded_answer: {answer.latex[:30]!r} in significant figures"
    places = [_decimals(n) for n in re.findall(r"\d*\.\d+", answer.latex)]
    given = max((_decimals(n) for n in re.findall(r"\d*\.\d+", stem)), default=0)
    if places and max(places) >= 2 and max(places) > given:
        return f"rounded_answer: {answer.latex[:30]!r} has more decimal places than the question's numbers"
    return None


# ----------------------------------------------------------------------------------------------
# Conversion of one item


def convert_item(item: MCItem) -> Converted | Rejected:
    """The open-answer item, or a rejection with its reason. Unbounded: call through `convert_bounded`."""
    reject = lambda reason: Rejected(item.id, item.source, reason)
    stem, _ = split_inline_options(item.question)
    if reason := stem_reason(stem):
        return reject(reason)
    gold_text = item.options[item.gold_letter]
    if META_GOLD.search(gold_text):
        return reject(f"gold_meta_option: {gold_text.strip()[:40]!r}")
    for letter, text in item.options.items():
        if TOGETHER.search(text) and letter != item.gold_letter and not re.search(r"\bnone of (these|the above)\b", text, re.IGNORECASE):
            # "both A and B" as a distractor says A and B were written to be weighed against each other.
            return reject(f"options_meaningful_together: option {letter} {text.strip()[:30]!r}")
    if reason := unstated_constant_reason(stem, item.options):
        return reject(reason)
    for letter, text in item.options.items():
        # A stem that names the options by letter ("if A is true …") cannot stand without them.
        if re.search(rf"\b(option|choice|answer)\s*\(?{letter}\)?(?![\w])", stem, re.IGNORECASE):
            return reject(f"stem_depends_on_options: refers to option {letter}")
    if (m := TIME_OF_DAY.fullmatch(gold_text)) and (m.group("half") or ASKS_TIME.search(stem)):
        return reject(f"time_of_day: {gold_text.strip()[:20]!r} is a clock time, not a number or ratio the reward grades")
    if PAIR_DASH.fullmatch(gold_text) and any(PAIR_DASH.fullmatch(t) for k, t in item.options.items() if k != item.gold_letter):
        # "21 - 61" answers "find the numbers", "652,000 - 628,000" a range: options so written are pairs, not differences
        return reject(f"ambiguous_dash: options written as {gold_text.strip()[:30]!r} (two numbers, or their difference)")
    variables, subscripts = stem_variables(stem), stem_subscripts(stem)
    answer = parse_answer(gold_text, variables, subscripts)
    if isinstance(answer, str):
        return reject(answer)
    if (m := FORM_ASKED.search(stem)) and CONSTANT_ARITHMETIC.fullmatch(answer.latex):
        # "2^4 \cdot 3" for a prime factorization, "200000 + 70000 + 200 + 40" for an expanded form: the reward
        # compares values, so 48, 6 \cdot 8 and 270240 would all score 1
        return reject(f"form_answer: the question asks for a form ({m.group(0)!r}) that a value checker cannot tell apart")
    if MODULAR_RING.search(stem) and re.search(r"[a-zA-Z]", re.sub(r"\\[a-zA-Z]+", "", answer.latex)):
        # "(x + 1)(x - 4)(x - 2) in Z_7[x]": (x + 1)(x + 3)(x + 5) is the same answer and a checker over Q rejects it
        return reject(f"modular_answer: a polynomial over {MODULAR_RING.search(stem).group(0)!r}")
    if reason := rounded_reason(stem, answer):
        return reject(reason)
    for letter, text in item.options.items():
        if letter == item.gold_letter:
            continue
        other = parse_answer(text, variables, subscripts)
        if isinstance(other, Answer) and (verify_parsed(answer.parsed, other.parsed) or verify_parsed(other.parsed, answer.parsed)):
            if answer.unit and other.unit and answer.unit != other.unit:
                # "1 nm" against a gold of "1 m": the reward grades the number with or without a unit, so a solver
                # who answers the distractor with its unit scores 1
                return reject(f"not_unique: option {letter} {text.strip()[:30]!r} differs from the gold only in its unit")
            return reject(f"not_unique: option {letter} {text.strip()[:30]!r} verifies as the gold {gold_text.strip()[:30]!r}")
    question = rewrite_stem(stem, answer)
    if not question:
        return reject("empty_question: nothing left once the options are removed")
    options = [{"letter": k, "text": v} for k, v in sorted(item.options.items())]
    return Converted(item.id, item.source, question, answer.latex, answer.answer_type, options, item.gold_letter)


_pool = None
_pool_lock = threading.Lock()


@atexit.register
def _close_pool() -> None:
    # Left to the garbage collector, the pool is torn down after the modules it needs at interpreter exit.
    if _pool is not None:
        _pool.terminate()


def call_bounded(fn: Callable, *args, seconds: float):
    """fn(*args) with a wall-clock limit. In a main thread: our own SIGALRM timer. Elsewhere (a
    trainer's reward thread) signals cannot be used, so the call runs in a child process that is
    killed when it overruns."""
    global _pool
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
        def on_alarm(_signum, _frame):
            raise CheckTimeout(f"over {seconds:g} s")

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            return fn(*args)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    with _pool_lock:
        if _pool is None:
            _pool = multiprocessing.get_context("spawn").Pool(1)
        pending = _pool.apply_async(fn, args)
        try:
            return pending.get(timeout=seconds)
        except multiprocessing.TimeoutError:
            _pool.terminate()
            _pool = None
            raise CheckTimeout(f"over {seconds:g} s") from None


def convert_bounded(item: MCItem | Rejected, seconds: float = ITEM_SECONDS) -> Converted | Rejected:
    if isinstance(item, Rejected):
        return item
    try:
        return call_bounded(convert_item, item, seconds=seconds)
    except CheckTimeout as error:
        return Rejected(item.id, item.source, f"verify_timeout: {error}")
    except Exception as error:  # noqa: BLE001 - a sympy failure on one item must not stop the run
        return Rejected(item.id, item.source, f"check_error: {type(error).__name__}: {str(error)[:200]}")


# ----------------------------------------------------------------------------------------------
# The job


@dataclass
class McqaResult:
    output: Path
    kept: int
    rejected: int
    by_source: dict[str, dict[str, int]]
    by_reason: dict[str, int]
    answer_types: dict[str, int]


def reason_code(reason: str) -> str:
    return reason.split(":", 1)[0]


class McqaBuilder(Builder):
    """Decides each item by its bounded conversion (in WORKERS processes when more than one); counts the answer
    types of the items it keeps."""

    def __init__(self, workers: int):
        self.workers = workers
        self.types: Counter = Counter()

    def decisions(self, items: Iterable[MCItem | Rejected]) -> Iterator[Decision]:
        for result in self._converted(items):
            if isinstance(result, Converted):
                self.types[result.answer_type] += 1
                yield Keep.row(result.row(), source=result.source)
            else:
                yield _reject(result.id, result.source, result.reason)

    def _converted(self, items: Iterable[MCItem | Rejected]) -> Iterator[Converted | Rejected]:
        if self.workers <= 1:
            yield from map(convert_bounded, items)
            return
        # Each worker's own main thread runs the bounded check, so its SIGALRM timer works there.
        with multiprocessing.get_context("spawn").Pool(self.workers) as pool:
            yield from pool.imap(convert_bounded, items, chunksize=16)


def _reject(item_id: str, source: str, reason: str) -> Reject:
    return Reject(reason_code(reason), {"id": item_id, "source": source, "reason": reason}, source)


SCHEMA = pa.schema([
    ("id", pa.string()), ("question", pa.string()), ("answer", pa.string()), ("answer_type", pa.string()),
    ("source", pa.string()), ("original_options", pa.list_(pa.struct([("letter", pa.string()), ("text", pa.string())]))),
    ("gold_letter", pa.string()), ("data_source", pa.string()), ("ability", pa.string()),
])


def run_mcqa(
    inputs: list[str], output: str | Path, fmt: str = "auto", workers: int = 1, limit: int = -1,
    progress: bool = True, batch_rows: int = 1000, dedup: bool = False, decontam: str | None = None,
    benchmarks_dir: str | Path | None = None, reformulate: dict | None = None,
) -> McqaResult:
    """Converts the inputs; `dedup` / `decontam` (benchmarks as `curate decontam --against`) then clean the result in place."""
    output = Path(output)
    if reformulate:
        LLMOptions(**reformulate).validate()  # a wrong backend fails before the conversion, not after it
    if decontam:
        parse_against(decontam, benchmarks_dir)  # so does a wrong --decontam
    for sub in ("data", "rejects", ".curate"):
        (output / sub).mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()

    def items() -> Iterator[MCItem | Rejected]:
        for path in inputs:
            for item in read_items(path, fmt, limit):
                if item.id in seen:
                    yield Rejected(item.id, item.source, "duplicate_id: an earlier record has this id")
                    continue
                seen.add(item.id)
                yield item

    builder = McqaBuilder(workers)
    # Both files appear once the conversion (and the reformulation) is done.
    with BuildOutput({"train": output / "data" / "train-00000.parquet"}, SCHEMA, output / "rejects" / "rejects.jsonl",
                     row_group=batch_rows, progress=progress, label="mcqa") as out:
        builder.run(items(), out)
        if reformulate:
            out.revise("train", _reformulation(reformulate, output, builder.types, progress), REFORMULATION_COLUMNS)
    types = builder.types
    for kind in [k for k, v in types.items() if v <= 0]:
        del types[kind]
    result = McqaResult(output, out.kept, out.rejected, {k: dict(v) for k, v in out.by_source.items()},
                        dict(out.by_reason.most_common()), dict(types.most_common()))
    parameters = {"inputs": inputs, "format": fmt, "limit": limit, "item_seconds": ITEM_SECONDS,
                  "fingerprint": hashlib.sha256(json.dumps([inputs, fmt, limit]).encode()).hexdigest()[:16]}
    if reformulate:
        parameters["reformulate"] = {**reformulate, "prompt_version": PROMPT_VERSION}
    stats = {"kept": result.kept, "rejected": result.rejected, "by_source": result.by_source,
             "by_reason": result.by_reason, "answer_types": result.answer_types}
    for name, content in (("parameters.json", parameters), ("stats.json", stats)):
        write_text_atomic(output / ".curate" / name, json.dumps(content, indent=2))
    write_mcqa_card(output, result, parameters, dedup, decontam, benchmarks_dir)
    # After the card: each adds its own report section to it. Only the stem is checked for contamination: the
    # answers are short LaTeX objects ("\frac{3}{4}") that lie inside many unrelated benchmark solutions.
    for side_file, wanted in (("duplicates.jsonl", dedup), ("contaminated.jsonl", decontam)):
        if not wanted:
            (output / "rejects" / side_file).unlink(missing_ok=True)  # from an earlier run with the option
    if dedup:
        dedup_dataset(output, text_key="question", progress=progress)
    if decontam:
        decontaminate_dataset(output, decontam, fields=["question"], benchmarks_dir=benchmarks_dir, progress=progress)
    return result


def check_mcqa(job: McqaJob) -> None:
    """What `curate mcqa` and the mcqa flow refuse before anything is claimed or read: a model without --reformulate
    (or the reverse), an unknown format, a wrong LLM backend, a local input that names no file."""
    if job.model and not job.reformulate:
        raise OptionError("--model applies to --reformulate only")
    if job.reformulate and not job.model:
        raise OptionError("--reformulate needs --model M (and --backend vllm|endpoint|transformers)")
    if job.format not in FORMATS:
        raise FormatError(f"unknown format {job.format!r}; choose one of {', '.join(FORMATS)}")
    if job.llm:
        LLMOptions(**job.llm).validate()
    for path in job.inputs:
        if not path.startswith("hf:"):
            try:
                input_files(path)
            except FileNotFoundError as error:  # a ValueError, so that a flow reports it as a parameter error
                raise InputError(str(error)) from None


def mcqa(job: McqaJob, progress: bool = True, refresh: bool = False) -> McqaResult | None:
    """Runs `curate mcqa` and the mcqa flow: claims the output for what decides the dataset (output_identity; a
    folder holding another dataset is refused unless `job.overwrite`), then converts. None when the output is up to
    date; `refresh` converts all the same (a flow whose cached result is stale)."""
    check_mcqa(job)
    what, inputs = output_identity(list(job.inputs), job.format, job.limit, job.llm, **job.cleaning.arguments())
    return write_once(job.output, "mcqa", what, lambda: run_mcqa(
        list(job.inputs), job.output, fmt=job.format, workers=job.workers, limit=job.limit, progress=progress,
        reformulate=job.llm, **job.cleaning.arguments()), inputs=inputs, overwrite=job.overwrite, refresh=refresh)


# What a reformulated row adds: the rule-based stem it replaced, and the model.
REFORMULATION_COLUMNS = [pa.field("rule_question", pa.string()), pa.field("reformulated_by", pa.string())]


def _reformulation(options: dict, output: Path, types: Counter, progress: bool) -> Callable[[list[dict]], list[Decision]]:
    """The LLM rewrite + judge over the converted rows, as a revision of them: accepted rows get the new stem (the
    rule-based one stays in `rule_question`), refused rows move to the rejects and leave the answer types."""

    def decide(rows: list[dict]) -> list[Decision]:
        verdicts = reformulate_rows(rows, LLMOptions(**options), output / ".curate" / "reformulate", stem_reason,
                                    progress) if rows else []
        decisions: list[Decision] = []
        for row, verdict in zip(rows, verdicts, strict=True):
            if isinstance(verdict, Rewrite):
                decisions.append(Keep.row({**row, "question": verdict.question, "rule_question": row["question"],
                                           "reformulated_by": options["model"]}, source=row["source"]))
            else:
                decisions.append(_reject(row["id"], row["source"], verdict))
                types[row["answer_type"]] -= 1
        return decisions

    return decide


FIELDS = [
    ("`id`", "string", "item id from the source (or source name and position)"),
    ("`question`", "string", "the stem without its options, with an answer-format instruction where the type needs one"),
    ("`answer`", "string", "the gold option as canonical LaTeX"),
    ("`answer_type`", "string", "kind of mathematical object the answer is"),
    ("`source`", "string", "input file the item came from"),
    ("`original_options`", "list of {letter, text}", "the options as they were"),
    ("`gold_letter`", "string", "the letter of the gold option"),
    ("`data_source`", "string", f"`{DATA_SOURCE}`: the registered reward in `curate.rewards` (math-verify, gold first)"),
    ("`ability`", "string", f"`{ABILITY}`"),
]
REFORMULATED_FIELDS = [
    ("`rule_question`", "string", "the rule-based stem the model rewrote"),
    ("`reformulated_by`", "string", "the model that rewrote it"),
]


def mcqa_command(output: Path, parameters: dict, dedup: bool, decontam: str | None,
                 benchmarks_dir: str | Path | None) -> str:
    options = [*(("--input", i) for i in parameters["inputs"]), ("--format", parameters["format"]), ("--output", output),
               ("--limit", parameters["limit"] if parameters["limit"] >= 0 else None)]
    if reformulated := parameters.get("reformulate"):
        options += [("--reformulate", True), ("--model", reformulated["model"]),
                    ("--backend", reformulated.get("backend", "transformers")),
                    ("--endpoint-url", reformulated.get("endpoint_url") or None),
                    ("--max-tokens", reformulated.get("max_tokens"))]
    return reproduce_command("mcqa", options=options, dedup=dedup, decontam=decontam, benchmarks_dir=benchmarks_dir)


def write_mcqa_card(output: Path, result: McqaResult, parameters: dict, dedup: bool = False, decontam: str | None = None,
                    benchmarks_dir: str | Path | None = None) -> None:
    from huggingface_hub import DatasetCardData


    card_data = DatasetCardData(
        license="other", language=["en"], task_categories=["question-answering", "text-generation"],
        size_categories=[size_category(result.kept)], pretty_name="curate: open-answer questions from multiple choice",
        tags=["math", "reasoning", "curate", "rl", "mcqa-to-open"], configs=split_configs(["train"]),
    )
    total = result.kept + result.rejected
    per_source = ["| source | items | kept | rate | top rejection reasons |", "|---|---|---|---|---|"]
    for source, counts in sorted(result.by_source.items()):
        n = counts.get("kept", 0) + counts.get("rejected", 0)
        reasons = sorted(((k, v) for k, v in counts.items() if k not in ("kept", "rejected")), key=lambda kv: -kv[1])[:3]
        per_source.append(f"| {source} | {n:,} | {counts.get('kept', 0):,} | {100 * counts.get('kept', 0) / max(n, 1):.1f} % | "
                          + ", ".join(f"{k} {v:,}" for k, v in reasons) + " |")
    per_reason = ["| reason | items | share of input |", "|---|---|---|"]
    per_reason += [f"| {k} | {v:,} | {100 * v / max(total, 1):.1f} % |" for k, v in result.by_reason.items()]
    per_reason += ["", "Every rejected item is in `rejects/rejects.jsonl` with its id and reason."]
    types = ["| type | items |", "|---|---|"] + [f"| {k} | {v:,} |" for k, v in result.answer_types.items()]
    sections = [("Conversion per source", "\n".join(per_source)), ("Rejections per reason", "\n".join(per_reason)),
                ("Answer types", "\n".join(types))]
    if reformulated := parameters.get("reformulate"):
        sections.append(("LLM reformulation", (
            f"Every converted stem was rewritten by `{reformulated['model']}` (backend "
            f"`{reformulated.get('backend', 'transformers')}`, prompts `{reformulated['prompt_version']}`) as an "
            "open-ended question with the same final answer, or declared not convertible (N/A); a second pass of the same "
            "model judged each rewrite, and the answer the rewrite stated had to verify as the gold with math-verify. "
            "Refusals are counted above under the `reformulate_*` reasons; `rule_question` keeps the rule-based stem.")))
    card = render_card(
        card_data,
        summary=f"{result.kept:,} of {total:,} multiple-choice items ({100 * result.kept / max(total, 1):.1f} %) kept as "
                "open-answer questions.",
        method="Training on multiple choice teaches elimination instead of derivation; an item is kept only when its stem "
               "stands without the options and its gold option is a mathematical object that math-verify grades uniquely "
               f"(no distractor verifies as equivalent). Export for a trainer with `curate export {output} --to verl "
               "--output …`.",
        parameters=[(k, v) for k, v in parameters.items() if k != "reformulate"]
        + [(f"reformulate {k}", v) for k, v in (parameters.get("reformulate") or {}).items()],
        command=mcqa_command(output, parameters, dedup, decontam, benchmarks_dir),
        sections=sections,
        fields=FIELDS + (REFORMULATED_FIELDS if parameters.get("reformulate") else []),
        load=load_snippet(["train"]),
        limitations="The filter is rule-based (stem patterns and answer parsing): its precision and recall on a "
                    "hand-labeled set are printed by `bench/mcqa_precision.py`. A kept item can still have a gold option "
                    "that is wrong in the source, or a stem whose answer was meant to be rounded to the nearest option.",
    )
    save_card(card, output)
