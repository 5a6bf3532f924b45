"""llm_spans_v1: the quoting prompt, the answer parser on answers as models write them, quotes aligned to offsets on
the span read's real texts (exact, whitespace- and case-normalised, LaTeX written into JSON undoubled), dropped quotes
counted, and the real request path against a stand-in endpoint that quotes the document and a tiny random model."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pyarrow.parquet as pq
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
from tests.support.http_standin import ChatHandler, ChatStandIn
from tests.support.shared import HAS_SERVE, SHARED_DATA

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
        # A quote has no score: spans_v1's field, where the schema has it, stays None.
        assert document[evidence.start:evidence.end] == quote and getattr(evidence, "score", None) is None


# --------------------------------------------------------------------------------------------- #
# The real request path
# --------------------------------------------------------------------------------------------- #
@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from tests.support.tiny_model import make_tiny_chat_model

    return make_tiny_chat_model(tmp_path_factory.mktemp("tiny") / "model")


class QuotingHandler(ChatHandler):
    server: QuotingServer

    def do_POST(self) -> None:
        request = self.read_request()
        content = self.server.answer(request)
        self.reply_chat(request, content, completion_tokens=len(content.split()))


class QuotingServer(ChatStandIn):
    """Stands in for a model that quotes: for a document whose first two lines differ it quotes the first line as is
    under verification, the second with its case and spacing changed under subgoal_setting, a sentence the document
    lacks under backtracking, and nothing under backward_chaining; other documents get prose with no quotes."""

    name = "quoting"

    def __init__(self):
        super().__init__(QuotingHandler)

    @staticmethod
    def lines(document: str) -> list[str]:
        return [line.strip() for line in document.splitlines() if line.strip()]

    @classmethod
    def quotes(cls, document: str) -> dict[str, list[str]] | None:
        lines = cls.lines(document)
        if len(lines) < 2 or lines[0] == lines[1]:
            return None
        return {"verification": [lines[0]], "subgoal_setting": ["  " + "  ".join(lines[1].upper().split())],
                "backtracking": ["This sentence is in no document."], "backward_chaining": []}

    def answer(self, request: dict) -> str:
        user = request["messages"][-1]["content"]
        document = user.split("<document>\n", 1)[1].rsplit("\n</document>", 1)[0]
        behavior = user.rsplit("Quote: ", 1)[1].strip()
        quotes = self.quotes(document)
        if quotes is None:
            return "The writer reasons carefully throughout."
        return "Here are the instances.\n" + json.dumps({"quotes": quotes[behavior]})


def _corpus(directory: Path) -> tuple[Path, dict[str, str]]:
    texts = [json.loads(line)["text"] for path in sorted((ROOT / "curate/sample_data/corpus").glob("*.jsonl"))
             for line in path.read_text().splitlines() if line.strip().startswith("{")]
    texts = [t for t in texts if isinstance(t, str)]
    quoting = [t for t in texts if QuotingServer.quotes(t) and t.count(QuotingServer.lines(t)[0]) == 1][:5]
    prose = [t for t in texts if QuotingServer.quotes(t) is None][:2]
    assert len(quoting) == 5 and len(prose) == 2
    by_id = {f"doc-{i}": text for i, text in enumerate(quoting + prose)}
    path = directory / "corpus.jsonl"
    path.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in by_id.items()))
    return path, by_id


def _rows(out: Path) -> list[dict]:
    return [r for f in sorted(out.glob("attributes_*.parquet")) for r in pq.read_table(f).to_pylist()]


def test_a_quoting_endpoint_through_inference_runner_gives_evidence_counts_and_dropped_quotes(tiny_model, tmp_path):
    """The real request path (datatrove's InferenceRunner, backend endpoint) against a stand-in that quotes the
    document: counts are the aligned quotes, evidence their offsets into the document, a quote the document lacks is
    counted in unaligned_quotes, and a document answered in prose has null counts with the reason."""
    from curate.pipelines.llm.tag_options import LLMTagOptions
    from curate.pipelines.llm_tag import run_llm_tagging
    from curate.pipelines.readers import InputSpec

    corpus, texts = _corpus(tmp_path)
    with QuotingServer() as server:
        options = LLMTagOptions(model=str(tiny_model), backend="endpoint", endpoint_url=server.url,
                                llm_version="llm_spans_v1", max_doc_tokens=4096, records_per_chunk=3)
        result = run_llm_tagging(InputSpec(str(corpus)), tmp_path / "tags", options, progress=False)
    assert result.tags_dir.name == "llm_spans_v1" and result.requests == 4 * len(texts)
    rows = {r["id"]: r for r in _rows(result.tags_dir)}
    assert sorted(rows) == sorted(texts)
    for doc_id, text in texts.items():
        row = rows[doc_id]
        assert row["classifier"] == "llm_spans_v1" and row["prompt_version"].startswith("llm_spans_v1-")
        lines = QuotingServer.lines(text)
        if QuotingServer.quotes(text) is None:
            assert all(row[b] is None for b in BEHAVIOR_NAMES) and row["evidence"] == []
            assert row["error"].startswith("parse: ") and "no quotes in 'The writer reasons" in row["error"]
            assert row["unaligned_quotes"] == 0
            continue
        assert row["error"] is None and row["unaligned_quotes"] == 1
        assert {b: row[b] for b in BEHAVIOR_NAMES} == {"verification": 1, "backtracking": 0, "subgoal_setting": 1,
                                                       "backward_chaining": 0}
        spans = {e["behavior"]: text[e["start"]:e["end"]] for e in row["evidence"]}
        assert spans == {"verification": lines[0], "subgoal_setting": lines[1]}
        assert all(e.get("score") is None for e in row["evidence"])


def test_a_gate_runs_in_front_of_llm_v1_only(tiny_model):
    from curate.pipelines.llm.options import ServerConfigError
    from curate.pipelines.llm.tag_options import LLMTagOptions

    assert LLMTagOptions(model=str(tiny_model)).classifier().name == "llm_v1"
    assert LLMTagOptions(model=str(tiny_model), llm_version="llm_spans_v1").classifier().name == "llm_spans_v1"
    with pytest.raises(ServerConfigError, match="llm_v1 only"):
        LLMTagOptions(model=str(tiny_model), llm_version="llm_spans_v1", gate="cues").classifier()


@pytest.mark.skipif(not HAS_SERVE, reason="transformers[serving] not installed (pip install 'curate[serve]')")
def test_tiny_model_through_transformers_serve_never_fabricates_a_count(tiny_model, tmp_path):
    """A random model's answers through `curate tag --classifier llm_spans_v1`'s options: whatever it writes, a row's
    counts and evidence are what its recorded answers give, and an answer with no quotes is a null count."""
    from curate.pipelines.jobs import TagJob
    from curate.pipelines.llm.options import ServerOptions
    from curate.pipelines.llm_tag import run_llm_tagging
    from curate.pipelines.readers import InputSpec
    from curate.pipelines.tagging import llm_options

    corpus, texts = _corpus(tmp_path)
    server = ServerOptions(model=str(tiny_model), backend="transformers", device="cpu")
    job = TagJob(classifier="llm_spans_v1", model=str(tiny_model), corpus=InputSpec(str(corpus)), server=server)
    options = dataclasses.replace(llm_options(job), max_doc_tokens=48, max_answer_tokens=8, mode="joint")
    result = run_llm_tagging(InputSpec(str(corpus)), tmp_path / "tags", options, progress=False, limit=3)
    rows = _rows(result.tags_dir)
    assert len(rows) == 3 and result.requests == 3
    for row in rows:
        assert row["classifier"] == "llm_spans_v1" and [a["question"] for a in row["llm_answers"]] == [JOINT]
        expected = span_labels_from_answers({JOINT: row["llm_answers"][0]["answer"]}, texts[row["id"]])
        assert {b: row[b] for b in BEHAVIOR_NAMES} == expected.counts and row["error"] == expected.error
        assert [(e["behavior"], e["start"], e["end"]) for e in row["evidence"]] == [
            (e.behavior, e.start, e.end) for e in expected.evidence]
        assert row["unaligned_quotes"] == len(expected.unaligned)
        if any(row[b] is None for b in BEHAVIOR_NAMES):
            assert row["error"].startswith("parse: ")
