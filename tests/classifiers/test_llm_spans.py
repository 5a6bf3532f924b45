"""llm_spans_v1: the quoting prompt, the answer parser on answers as models write them, quotes aligned to offsets on
the span read's real texts (exact, whitespace- and case-normalised, LaTeX written into JSON undoubled), dropped quotes
counted, and the real request path against a stand-in endpoint that quotes the document and a tiny random model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers import get_classifier, resolve_name
from curate.classifiers.llm import JOINT, ParseError, PromptSet
from curate.classifiers.llm_spans import (
    PROMPTS_DIR,
    QuoteAligner,
    Unaligned,
    normalise,
    parse_joint_quotes,
    parse_quotes,
    span_labels_from_answers,
)
from tests.support.shared import SHARED_DATA

ROOT = Path(__file__).resolve().parents[2]
SPANS = ROOT / "evals" / "spans"
# llm_v1 is released: its prompt files may not change (a new prompt is a new version, as this one is).
LLM_V1_PROMPT_VERSION = "llm_v1-f5c2bf89009a"


# --------------------------------------------------------------------------------------------- #
# The prompt
# --------------------------------------------------------------------------------------------- #
def test_prompt_is_a_new_version_with_the_guides_boundaries_and_llm_v1s_layout():
    prompts = PromptSet.load(PROMPTS_DIR)
    assert prompts.version.startswith("llm_spans_v1-") and PromptSet.load().version == LLM_V1_PROMPT_VERSION
    system = prompts.system
    for rule in ("a plan stated as goals", "a bare sequence of computed steps", "reaches a verdict",
                 "One instance, one quote", "character for character", "quote it under both"):
        assert rule in system, rule
    for behavior in BEHAVIOR_NAMES:
        assert f"{behavior}:" in system and prompts.questions[behavior] == f"Quote: {behavior}"
    assert prompts.questions[JOINT] == "Quote: all"
    # Every example answer in the system prompt is one the parser reads.
    examples = re.findall(r"for example (\{.*?\})(?:,|$)", system, re.MULTILINE)
    assert len(examples) == 2
    assert parse_quotes(examples[0], "verification") == [
        "So x = 4. Check: 2(4) + 3 = 11, which matches the given equation."]
    quotes, problems = parse_joint_quotes(examples[1])
    assert not problems and quotes["subgoal_setting"] == ["There are two cases to consider: n even and n odd."]


def test_requests_put_the_document_first_and_ask_for_quotes_by_schema(tiny_model):
    llm = get_classifier("llm_spans_v1", model=str(tiny_model), mode="joint", structured=True)
    assert llm.name == "llm_spans_v1" and llm.prompt_version.startswith("llm_spans_v1-")
    assert llm.max_answer_tokens == 1536
    document = "We want 24. So we need 4 * 6.\nCheck: 4 * 6 = 24, which matches."
    (key, payload), = llm.requests(document)[0]
    assert key == JOINT and payload["messages"][1]["content"].startswith("<document>\n" + document)
    assert payload["messages"][1]["content"].endswith("</document>\n\nQuote: all")
    schema = payload["response_format"]["json_schema"]["schema"]
    assert schema["required"] == list(BEHAVIOR_NAMES)
    assert schema["properties"]["verification"] == {"type": "array", "items": {"type": "string"}}
    per_behavior = get_classifier("llm_spans_v1", model=str(tiny_model))
    assert [k for k, _ in per_behavior.requests(document)[0]] == list(BEHAVIOR_NAMES)
    assert per_behavior.max_answer_tokens == 512
    assert resolve_name("llm")[0] == "llm_v1"  # the family name stays on the released version


# --------------------------------------------------------------------------------------------- #
# Parsing
# --------------------------------------------------------------------------------------------- #
WELL_FORMED = [
    ('{"quotes": ["Check: 3 + 2 = 5."]}', ["Check: 3 + 2 = 5."]),
    ('{"quotes": []}', []),
    ('```json\n{"quotes": ["a", "b"]}\n```', ["a", "b"]),
    ('The writer checks once.\n{"quotes": ["x = 3 works"]}', ["x = 3 works"]),
    ('{"verification": ["x = 3 works"]}', ["x = 3 works"]),
    ('["x = 3 works", "so 12 = 12"]', ["x = 3 works", "so 12 = 12"]),
    ('{"quotes": [{"quote": "x = 3 works", "occurrence": 2}]}', ["x = 3 works"]),
    ('<think>Two checks? No, one.</think>{"quotes": ["x = 3 works"]}', ["x = 3 works"]),
    # LaTeX written into a JSON string without doubling its backslashes, braces unbalanced inside the string.
    (r'{"quotes": ["so $\sqrt{x} = \left\{ 2$ holds"]}', [r"so $\sqrt{x} = \left\{ 2$ holds"]),
    ('{"quotes": ["He said \\"yes\\" twice", "  "]}', ['He said "yes" twice']),
]
MALFORMED = [
    "",
    "The writer checks the result twice.",
    '{"quotes": "x = 3 works"}',
    '{"quotes": [3]}',
    '{"quotes": ["unterminated',
    "<think>the first check is",
    "ĠtheĠofĠandĊĊ<|endoftext|>",
]


@pytest.mark.parametrize(("answer", "expected"), WELL_FORMED)
def test_parse_quotes_reads_well_formed_answers(answer, expected):
    assert parse_quotes(answer, "verification") == expected


@pytest.mark.parametrize("answer", MALFORMED)
def test_parse_quotes_rejects_malformed_answers(answer):
    with pytest.raises(ParseError):
        parse_quotes(answer, "verification")


def test_an_unreadable_answer_is_null_with_its_reason_never_zero():
    document = "We need 2 more. Check: 3 + 2 = 5, correct."
    labels = span_labels_from_answers({"verification": '{"quotes": ["Check: 3 + 2 = 5, correct."]}',
                                       "backtracking": "no idea", "subgoal_setting": '{"quotes": []}',
                                       "backward_chaining": '["We need 2 more."]'}, document)
    assert labels.counts == {"verification": 1, "backtracking": None, "subgoal_setting": 0, "backward_chaining": 1}
    assert labels.error.startswith("parse: ") and "backtracking: no quotes in 'no idea'" in labels.error
    joint = span_labels_from_answers({JOINT: "The document shows reasoning."}, document)
    assert all(v is None for v in joint.counts.values()) and joint.error.startswith("parse: no quotes")
    assert joint.evidence == [] and joint.unaligned == []
    partial = span_labels_from_answers({JOINT: '{"verification": [], "subgoal": ["We need 2 more."], '
                                               '"backtracking": "none"}'}, document)
    assert partial.counts == {"verification": 0, "backtracking": None, "subgoal_setting": 1,
                              "backward_chaining": None}
    assert "backtracking: expected a list" in partial.error and "backward_chaining: missing" in partial.error


# --------------------------------------------------------------------------------------------- #
# Alignment on the span read's real texts
# --------------------------------------------------------------------------------------------- #
@pytest.fixture(scope="module")
def labeled_spans():
    """(text, behavior, start, end) of every adjudicated span of the span read, texts resolved from shared data."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA} (set CURATE_SHARED_DATA)")
    from evals.spans.align import texts_by_id

    texts = texts_by_id()
    rows = [json.loads(line) for line in (SPANS / "labels.jsonl").read_text().splitlines()]
    return [(texts[r["id"]], s["behavior"], s["start"], s["end"]) for r in rows for s in r["spans"]]


def test_every_labeled_quote_aligns_exactly_to_its_first_occurrence(labeled_spans):
    assert len(labeled_spans) > 900
    for text, behavior, start, end in labeled_spans:
        quote = text[start:end]
        where = QuoteAligner(text).align(behavior, quote)
        assert where == (text.find(quote), text.find(quote) + len(quote))


def test_a_quote_with_its_whitespace_and_case_changed_aligns_to_the_original_span(labeled_spans):
    moved = 0
    for text, behavior, start, end in labeled_spans:
        quote = text[start:end]
        changed = "  " + " ".join(quote.split()).upper() + "\n"
        needle = normalise(changed)[0]
        if normalise(text)[0].count(needle) != 1 or changed.strip() in text:
            continue  # ambiguous once normalised, or still an exact match
        assert QuoteAligner(text).align(behavior, changed) == (start, end), quote
        moved += 1
    assert moved > 400


def test_latex_quotes_written_into_json_undoubled_align(labeled_spans):
    """A model that copies LaTeX into a JSON string as is writes invalid escapes (\\sqrt) or valid ones that mean
    something else (\\frac is a form feed and 'rac'); both quotes still land on the labeled span."""
    latex = [(t, b, s, e) for t, b, s, e in labeled_spans if "\\" in t[s:e] and t.count(t[s:e]) == 1]
    assert len(latex) > 50
    for text, behavior, start, end in latex:
        answer = '{"quotes": ["' + text[start:end].replace('"', '\\"') + '"]}'
        labels = span_labels_from_answers({behavior: answer}, text)
        assert [(e.start, e.end) for e in labels.evidence] == [(start, end)], text[start:end]


def test_quotes_not_in_the_text_are_dropped_and_counted_and_repeats_take_later_occurrences(labeled_spans):
    text, behavior, start, end = next(s for s in labeled_spans if len(s[0][s[2]:s[3]].split()) > 6)
    quote = text[start:end]
    words = quote.split()
    paraphrase = " ".join(words[:3] + ["clearly"] + words[3:])
    shortened = " ".join(words[:2]) + " ... " + " ".join(words[-2:])
    document = f"{text}\n\n{quote}"  # the quoted words now occur twice
    labels = span_labels_from_answers({behavior: json.dumps({"quotes": [quote, paraphrase, quote, shortened,
                                                                        quote]})}, document)
    second = document.rindex(quote)
    assert labels.counts[behavior] == 2 and [(e.start, e.end) for e in labels.evidence] == [
        (document.find(quote), document.find(quote) + len(quote)), (second, second + len(quote))]
    assert labels.unaligned == [Unaligned(behavior, paraphrase, "not found"), Unaligned(behavior, shortened, "not found"),
                                Unaligned(behavior, quote, "repeated")]
    assert labels.error is None  # a dropped quote is counted, not an error: the row stays selectable
    for evidence in labels.evidence:
        assert document[evidence.start:evidence.end] == quote and evidence.score is None


# --------------------------------------------------------------------------------------------- #
# The real request path
# --------------------------------------------------------------------------------------------- #
@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from tests.support.tiny_model import make_tiny_chat_model

    return make_tiny_chat_model(tmp_path_factory.mktemp("tiny") / "model")
