"""`llm_spans_v1`: an instruction-tuned model quotes each instance of each behavior; quotes become evidence spans.

Where `llm_v1` asks for a count, this version asks for every instance as an exact quote, under definitions as tight
as the span read's guide (evals/spans/GUIDE.md): a plan stated as goals, not a sequence of computed steps; a check of
the writer's own result that reaches a verdict; one quote per instance. Each quote is aligned to character offsets
in the document, exactly where it can be and else with whitespace and case normalised, so the label can be checked:
a behavior's count is the number of aligned instances and its evidence those spans (Evidence, score None).

A quote that cannot be found in the document is dropped, not counted, and kept in `SpanLabels.unaligned` (the tag
row's `unaligned_quotes`); a quote repeated beyond the times its words occur is dropped too. An answer with nothing
readable gives a null count with `error="parse: ..."`, never 0, as in llm_v1.

Prompt layout, truncation, modes and the request path are llm_v1's (curate.classifiers.llm): the document first,
the definitions in the system prompt, one short question line after the document.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from curate.behaviors import BEHAVIOR_NAMES, UnknownBehaviorError, parse_behavior
from curate.classifiers.base import register
from curate.classifiers.llm import (
    JOINT,
    LLMClassifier,
    ParseError,
    answer_snippet,
    build_payload,
    clean_answer,
    question_keys,
)
from curate.schema import Evidence, Labels

PROMPTS_DIR = Path(__file__).parent / "prompts" / "llm_spans_v1"
# Quotes cost far more than a count: a long trace may show ten checks of a sentence or two each.
MAX_ANSWER_TOKENS = {"per-behavior": 512, "joint": 1536}
QUOTES_KEY = "quotes"
# JSON escapes; any other backslash in an answer is LaTeX that the model did not double.
JSON_ESCAPE = re.compile(r'\\(u[0-9a-fA-F]{4}|["\\/bfnrt])?')
JSON_START = re.compile(r"[{\[]")
# LaTeX commands that a JSON decoder turns into control characters when the backslash is not doubled
# (\frac -> form feed + "rac", \times -> tab + "imes", \beta -> backspace + "eta", \neq -> newline + "eq").
MISREAD_LATEX = {"\f": "\\f", "\b": "\\b", "\t": "\\t", "\r": "\\r"}
NEWLINE_BEFORE_LETTER = re.compile(r"\n(?=[a-z])")


# --------------------------------------------------------------------------------------------- #
# Alignment: quote -> character offsets
# --------------------------------------------------------------------------------------------- #
@dataclass(frozen=True)
class Unaligned:
    """A quote of the answer that was dropped: not found in the document, or repeated more often than it occurs."""

    behavior: str
    quote: str
    reason: str  # "not found" or "repeated"


def normalise(text: str) -> tuple[str, list[int]]:
    """The text with each whitespace run made one space (none at the ends) and letters casefolded, and for each of its
    characters the index of the character of `text` it came from."""
    chars: list[str] = []
    origin: list[int] = []
    space_at = -1
    for index, char in enumerate(text):
        if char.isspace():
            if chars and space_at < 0:
                space_at = index
            continue
        if space_at >= 0:
            chars.append(" ")
            origin.append(space_at)
            space_at = -1
        folded = char.casefold()
        chars.extend(folded)
        origin.extend([index] * len(folded))
    return "".join(chars), origin


def _occurrences(haystack: str, needle: str) -> Iterator[int]:
    start = haystack.find(needle)
    while start >= 0:
        yield start
        start = haystack.find(needle, start + 1)


class QuoteAligner:
    """Finds quotes in one document. Each call takes the first occurrence not yet taken by an earlier quote of the
    same behavior, so a phrase quoted twice lands on its first and second occurrence."""

    def __init__(self, document: str):
        self.document = document
        self.normalised, self.origin = normalise(document)
        self.taken: set[tuple[str, int, int]] = set()

    def _spans(self, quote: str) -> Iterator[tuple[int, int]]:
        """Where the quote occurs: exact matches first, then matches of its normalised form."""
        if not quote:
            return
        exact = list(_occurrences(self.document, quote))
        yield from ((start, start + len(quote)) for start in exact)
        if exact:
            return
        needle, _ = normalise(quote)
        if not needle:
            return
        for start in _occurrences(self.normalised, needle):
            yield self.origin[start], self.origin[start + len(needle) - 1] + 1

    def align(self, behavior: str, quote: str) -> tuple[int, int] | Unaligned:
        """The offsets of the quote's next untaken occurrence, or why it has none."""
        # The quote as read, then with misread LaTeX restored: control characters first, then also a line break
        # before a letter (\neq), which may as well be a real one.
        relatexed = quote.translate(str.maketrans(MISREAD_LATEX))
        candidates = list(dict.fromkeys([quote, relatexed, NEWLINE_BEFORE_LETTER.sub(r"\\n", relatexed)]))
        found_any = False
        for candidate in candidates:
            for start, end in self._spans(candidate):
                found_any = True
                if (behavior, start, end) not in self.taken:
                    self.taken.add((behavior, start, end))
                    return start, end
            if found_any:
                break
        return Unaligned(behavior, quote, "repeated" if found_any else "not found")


# --------------------------------------------------------------------------------------------- #
# Parsing answers
# --------------------------------------------------------------------------------------------- #
def _repair_escapes(text: str) -> str:
    """Doubles every backslash that does not start a JSON escape (LaTeX written inside a JSON string as is)."""
    return JSON_ESCAPE.sub(lambda m: m.group(0) if m.group(1) else "\\\\", text)


def _scan(text: str) -> tuple[list[object], int]:
    """The top-level JSON values that decode at a '{' or '[' of text, and how many characters they cover. Raw line
    breaks and tabs inside a string are read as themselves (strict=False): models copy multi-line quotes as they are."""
    decoder = json.JSONDecoder(strict=False)
    values, covered, index = [], 0, 0
    while (match := JSON_START.search(text, index)) is not None:
        try:
            value, end = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            index = match.start() + 1
            continue
        values.append(value)
        covered += end - match.start()
        index = end
    return values, covered


def json_values(text: str) -> list[object]:
    """The top-level JSON objects and arrays in text, read string-aware (a quote may hold unbalanced LaTeX braces).
    Where doubling the backslashes that start no JSON escape (LaTeX written into a string as is) lets more of the
    text decode, the repaired reading is taken: otherwise an object that fails on "\\sqrt" would leave only a list
    nested in it."""
    values, covered = _scan(text)
    repaired = _repair_escapes(text)
    if repaired != text:
        repaired_values, repaired_covered = _scan(repaired)
        if repaired_covered > covered:
            values = repaired_values
    return [v for v in values if isinstance(v, (dict, list))]


def _quote_list(value: object, behavior: str) -> list[str]:
    """A behavior's quotes: a list of strings (or of {"quote": ...} objects); anything else is a ParseError."""
    if not isinstance(value, list):
        raise ParseError(f"{behavior}: expected a list of quotes, got {type(value).__name__}")
    quotes = []
    for item in value:
        if isinstance(item, dict) and isinstance(item.get("quote"), str):
            item = item["quote"]
        if not isinstance(item, str):
            raise ParseError(f"{behavior}: a quote must be a string, got {type(item).__name__}")
        if item.strip():
            quotes.append(item)
    return quotes


def parse_quotes(answer: str, behavior: str) -> list[str]:
    """One behavior's quotes from a model answer; raises ParseError with the reason."""
    text = clean_answer(answer)
    if not text:
        raise ParseError("empty answer")
    values = json_values(text)
    for value in values:
        if isinstance(value, dict):
            for key in (QUOTES_KEY, behavior):
                if key in value:
                    return _quote_list(value[key], behavior)
            if len(value) == 1:
                return _quote_list(next(iter(value.values())), behavior)
    for value in values:
        if isinstance(value, list):
            return _quote_list(value, behavior)
    raise ParseError(f"no quotes in {answer_snippet(answer)}")


def parse_joint_quotes(answer: str) -> tuple[dict[str, list[str] | None], list[str]]:
    """Every behavior's quotes from one answer; returns (quotes, problems). Unreadable behaviors stay None."""
    quotes: dict[str, list[str] | None] = {b: None for b in BEHAVIOR_NAMES}
    try:
        text = clean_answer(answer)
    except ParseError as error:
        return quotes, [str(error)]
    found: dict[str, object] = {}
    for value in json_values(text):
        if not isinstance(value, dict):
            continue
        for key, item in value.items():
            try:
                found.setdefault(parse_behavior(str(key).replace(" ", "_")).value, item)
            except UnknownBehaviorError:
                continue
    if not found:
        return quotes, [f"no quotes in {answer_snippet(answer)}"]
    problems = []
    for behavior in BEHAVIOR_NAMES:
        if behavior not in found:
            problems.append(f"{behavior}: missing")
            continue
        try:
            quotes[behavior] = _quote_list(found[behavior], behavior)
        except ParseError as error:
            problems.append(str(error))
    return quotes, problems


@dataclass
class SpanLabels(Labels):
    """Labels whose evidence is the aligned quotes, plus the quotes that were dropped."""

    unaligned: list[Unaligned] = field(default_factory=list)


def align_quotes(document: str, quotes: dict[str, list[str] | None], problems: Sequence[str] = ()) -> SpanLabels:
    """Labels from each behavior's quotes (None: unreadable, a null count): counts and evidence are the quotes found
    in the document; the others are dropped into `unaligned`."""
    aligner = QuoteAligner(document)
    counts: dict[str, int | None] = {b: None for b in BEHAVIOR_NAMES}
    evidence: list[Evidence] = []
    unaligned: list[Unaligned] = []
    for behavior in BEHAVIOR_NAMES:
        if quotes.get(behavior) is None:
            continue
        counts[behavior] = 0
        for quote in quotes[behavior]:
            where = aligner.align(behavior, quote)
            if isinstance(where, Unaligned):
                unaligned.append(where)
                continue
            counts[behavior] += 1
            evidence.append(Evidence(behavior, *where))
    evidence.sort(key=lambda e: (e.start, e.end, BEHAVIOR_NAMES.index(e.behavior)))
    error = ("parse: " + "; ".join(problems)) if problems else None
    return SpanLabels(counts=counts, evidence=evidence, error=error, unaligned=unaligned)


def span_labels_from_answers(answers: dict[str, str], document: str) -> SpanLabels:
    """answers: question key ("joint" or a behavior) -> answer text; document: the text the quotes come from."""
    if JOINT in answers:
        quotes, problems = parse_joint_quotes(answers[JOINT])
        return align_quotes(document, quotes, problems)
    quotes: dict[str, list[str] | None] = {b: None for b in BEHAVIOR_NAMES}
    problems = []
    for behavior, answer in answers.items():
        try:
            quotes[behavior] = parse_quotes(answer, behavior)
        except ParseError as error:
            problems.append(f"{behavior}: {error}")
    return align_quotes(document, quotes, problems)


# --------------------------------------------------------------------------------------------- #
# The registered classifier
# --------------------------------------------------------------------------------------------- #
def quotes_schema(question_key: str) -> dict:
    keys = [QUOTES_KEY] if question_key != JOINT else list(BEHAVIOR_NAMES)
    quote_list = {"type": "array", "items": {"type": "string"}}
    return {"type": "object", "properties": {k: quote_list for k in keys}, "required": keys,
            "additionalProperties": False}


class LLMSpansClassifier(LLMClassifier):
    """llm_v1's configuration and request path with the quoting prompt; `read_answers` aligns the quotes."""

    name = "llm_spans_v1"
    prompts_dir = PROMPTS_DIR
    answer_tokens = MAX_ANSWER_TOKENS

    def requests(self, text: str) -> tuple[list[tuple[str, dict]], bool, int]:
        """The payloads for one document: ([(question key, payload)], truncated, document tokens)."""
        document, truncated, n_tokens = self.truncator(text)
        payloads = []
        for key in question_keys(self.mode):
            payload = build_payload(self.prompts, document, key, self.mode, False, self.max_answer_tokens,
                                    self.chat_template_kwargs)
            if self.structured:
                payload["response_format"] = {"type": "json_schema", "json_schema": {
                    "name": f"{key}_quotes", "schema": quotes_schema(key), "strict": True}}
            payloads.append((key, payload))
        return payloads, truncated, n_tokens

    def read_answers(self, answers: dict[str, str], document: str) -> SpanLabels:
        return span_labels_from_answers(answers, document)

    def classify(self, texts: Sequence[str]) -> list[Labels]:
        raise RuntimeError(
            f"{self.name} sends its requests through datatrove's InferenceRunner, which owns the model server; "
            f"it cannot run inside the batch tagger. Use `curate tag --classifier {self.name} --model M --backend ...` "
            "(or run_llm_tagging in curate.pipelines.llm_tag with LLMTagOptions(llm_version=...))."
        )


@register("llm_spans_v1")
def make_llm_spans_classifier(model: str | None = None, **options) -> LLMSpansClassifier:
    return LLMSpansClassifier(model or "", **options)
