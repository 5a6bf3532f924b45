"""llm_v1 / cascade_v1: prompt layout, truncation, the answer parser on realistic answers, and the
real path on CPU: a tiny random Qwen2 chat model served by `transformers serve`, driven by
datatrove's InferenceRunner, including a run killed mid-way and resumed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers import get_classifier, resolve_name
from curate.classifiers.cascade import gate_passes, gate_report
from curate.classifiers.llm import (
    JOINT,
    ParseError,
    PromptSet,
    Truncator,
    build_payload,
    labels_from_answers,
    parse_count,
    parse_joint,
)
from curate.schema import Labels
from tests.support.shared import HAS_SERVE

ROOT = Path(__file__).resolve().parents[2]

# --------------------------------------------------------------------------------------------- #
# Parser corpus: answers as models actually write them
# --------------------------------------------------------------------------------------------- #
WELL_FORMED = [
    ('{"count": 3}', 3),
    ('{"count":0}', 0),
    ('  {\n  "count" : 2\n}\n', 2),
    ('```json\n{"count": 4}\n```', 4),
    ('```\n{"count": 1}\n```\nThe writer checks once.', 1),
    ('<count> 3 </count>', 3),
    ('<count>\n7\n</count>', 7),
    ('<COUNT>2</COUNT>', 2),
    ("Looking at the document, the writer verifies the result twice.\n\n{\"count\": 2}", 2),
    ('{"count": "5"}', 5),
    ("{'count': 1}", 1),
    ('{"verification": 2}', 2),
    ("3", 3),
    ("  0.\n", 0),
    ("**2**", 2),
    ("Count: 4", 4),
    ("The answer is 6.", 6),
    ("Number of instances: 1", 1),
    ("none", 0),
    ("Zero", 0),
    ("<think>The writer says 'check' in line 3, and again at the end, maybe 2 or 3.</think>\n{\"count\": 2}", 2),
    ('{"count": 2.0}', 2),
]
MALFORMED = [
    "",
    "   \n ",
    "I cannot determine this from the document.",
    '{"count": -1}',
    '{"count": 2.5}',
    '{"count": "several"}',
    '{"count": true}',
    '{"count": 1999}',
    "Count: 2. Actually, count: 3.",
    "ĠtheĠofĠandĊĊ<|endoftext|>",
    '{"count": ',
    "<count></count>",
]


@pytest.mark.parametrize(("answer", "expected"), WELL_FORMED)
def test_parse_count_reads_well_formed_answers(answer, expected):
    assert parse_count(answer, "verification") == expected


@pytest.mark.parametrize("answer", MALFORMED)
def test_parse_count_rejects_malformed_answers(answer):
    with pytest.raises(ParseError):
        parse_count(answer, "verification")


def test_unparseable_answer_is_null_with_reason_never_zero():
    labels = labels_from_answers({"verification": "{\"count\": 2}", "backtracking": "no idea", "subgoal_setting": "0",
                                  "backward_chaining": "<count> 1 </count>"})
    assert labels.counts == {"verification": 2, "backtracking": None, "subgoal_setting": 0, "backward_chaining": 1}
    assert labels.error.startswith("parse: ") and "backtracking" in labels.error and "no idea" in labels.error


def test_parse_joint_variants():
    counts, problems = parse_joint('```json\n{"verification": 2, "backtracking": 0, "subgoal_setting": 3, "backward_chaining": 1}\n```')
    assert counts == {"verification": 2, "backtracking": 0, "subgoal_setting": 3, "backward_chaining": 1} and not problems
    counts, problems = parse_joint("Here are the counts:\nVerification: 1\nBacktracking: 2\nSubgoal setting: 0\nBackward chaining: 4\n")
    assert counts == {"verification": 1, "backtracking": 2, "subgoal_setting": 0, "backward_chaining": 4} and not problems
    counts, problems = parse_joint('{"verification": 1, "backtracking": "many", "subgoal": 2}')
    assert counts == {"verification": 1, "backtracking": None, "subgoal_setting": 2, "backward_chaining": None}
    assert any("backtracking" in p for p in problems) and any("backward_chaining: missing" in p for p in problems)
    labels = labels_from_answers({JOINT: "The document shows reasoning."})
    assert all(v is None for v in labels.counts.values()) and labels.error.startswith("parse: no counts")


# --------------------------------------------------------------------------------------------- #
# Prompts and truncation
# --------------------------------------------------------------------------------------------- #
def test_prompt_layout_puts_document_first_and_shares_the_prefix():
    prompts = PromptSet.load()
    assert prompts.version.startswith("llm_v1-") and len(prompts.version) == len("llm_v1-") + 12
    document = "We solve x + 2 = 5.\nSo x = 3. Check: 3 + 2 = 5."
    users = [build_payload(prompts, document, b, "per-behavior", False)["messages"][1]["content"] for b in BEHAVIOR_NAMES]
    assert all(u.startswith("<document>\n" + document) for u in users)
    prefix = os.path.commonprefix(users)
    assert document in prefix and len(prefix) >= len(document)
    structured = build_payload(prompts, document, JOINT, "joint", True)
    schema = structured["response_format"]["json_schema"]["schema"]
    assert structured["temperature"] == 0.0 and schema["required"] == list(BEHAVIOR_NAMES)


def test_per_document_prompt_overhead_is_small_and_everything_shared_is_in_the_system_prompt():
    """What a prefix-caching server prefills per document beyond the document itself: the end of the
    document block once, then each question. The definitions and answer format must live in the system
    prompt (shared by the whole corpus), so each question is one short line after the document."""
    prompts = PromptSet.load()
    document = "We solve x + 2 = 5.\nSo x = 3. Check: 3 + 2 = 5."
    for key in (*BEHAVIOR_NAMES, JOINT):
        messages = build_payload(prompts, document, key, "joint" if key == JOINT else "per-behavior", False)["messages"]
        assert [m["role"] for m in messages] == ["system", "user"] and messages[0]["content"] == prompts.system
        question = messages[1]["content"].split("</document>", 1)[1].strip()
        assert question == prompts.questions[key] and "\n" not in question and question.startswith("Count: ")
        assert key == JOINT or question == f"Count: {key}"  # the behavior is named, as the system prompt defines it
    for behavior in BEHAVIOR_NAMES:
        assert f"{behavior}:" in prompts.system  # its definition
    assert '"Count: all"' in prompts.system and '{"count": 2}' in prompts.system  # both answer formats
    # Per document: the closing tag once (shared by the four requests), then four questions. On the sample
    # corpus that is about a fifth of the document's characters (the earlier long questions cost 1.7 times the document); in
    # tokens it is less, since math text takes more tokens per character: bench/prompt_economy.py measures it.
    texts = [json.loads(l)["text"] for f in sorted((ROOT / "curate/sample_data/corpus").glob("*.jsonl"))
             for l in f.read_text().splitlines() if l.strip()]
    block_tail = prompts.document.split("{document}", 1)[1]
    overhead = len(block_tail) + 2 + sum(len(prompts.questions[b]) for b in BEHAVIOR_NAMES)
    assert overhead <= 0.25 * (sum(map(len, texts)) / len(texts))


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from tests.support.tiny_model import make_tiny_chat_model

    return make_tiny_chat_model(tmp_path_factory.mktemp("tiny") / "model")


def test_truncation_cuts_at_last_newline_by_model_tokens(tiny_model):
    truncate = Truncator(str(tiny_model), max_tokens=40)
    lines = [f"Line {i}: we check that {i} squared is {i * i}." for i in range(40)]
    text = "\n".join(lines)
    kept, truncated, n_tokens = truncate(text)
    assert truncated and kept.endswith("\n") and text.startswith(kept)
    assert n_tokens <= 40 and len(truncate.tokenizer(kept, add_special_tokens=False)["input_ids"]) == n_tokens
    short = "x = 3."
    assert truncate(short)[:2] == (short, False)


def test_registry_and_cascade_gate():
    assert resolve_name("llm")[0] == "llm_v1" and resolve_name("cascade")[0] == "cascade_v1"
    cues = get_classifier("cues")
    with_cue, without = cues.classify(["Let me check: 3 + 2 = 5, which matches.", "The weather was nice today."])
    assert gate_passes(with_cue) and not gate_passes(without)
    assert gate_passes(Labels.failed("classifier: broke"))  # unknown is sent on, not dropped
    llm_rows = [{b: (1 if b == "verification" else 0) for b in BEHAVIOR_NAMES}, {b: 0 for b in BEHAVIOR_NAMES},
                {b: None for b in BEHAVIOR_NAMES}]
    report = gate_report(zip([with_cue, without, without], llm_rows))
    assert report.documents == 2 and report.skipped_unlabelled == 1
    assert report.recall["verification"] == 1.0 and report.any_recall == 1.0 and report.requests_saved == 0.5


# --------------------------------------------------------------------------------------------- #
# The real path: transformers serve + InferenceRunner
# --------------------------------------------------------------------------------------------- #
def _corpus(directory: Path, n: int) -> Path:
    lines = [json.loads(l) for l in (ROOT / "curate/sample_data/corpus/part1.jsonl").read_text().splitlines() if l.strip()]
    texts = [l["text"] for l in lines if isinstance(l, dict) and isinstance(l.get("text"), str)]
    path = directory / "corpus.jsonl"
    with path.open("w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"doc-{i:03d}", "text": texts[i % len(texts)]}) + "\n")
        f.write("{not json\n")
    return path


def _rows(out: Path) -> list[dict]:
    return [r for f in sorted(out.glob("attributes_*.parquet")) for r in pq.read_table(f).to_pylist()]


@pytest.mark.skipif(not HAS_SERVE, reason="transformers[serving] not installed (pip install 'curate[serve]')")
def test_tiny_model_through_inference_runner_gives_null_parse_errors(tiny_model, tmp_path):
    from curate.pipelines.llm_tag import LLMTagOptions, run_llm_tagging
    from curate.pipelines.readers import InputSpec

    corpus = _corpus(tmp_path, 3)
    options = LLMTagOptions(model=str(tiny_model), backend="transformers", device="cpu", max_doc_tokens=48,
                            max_answer_tokens=6, records_per_chunk=2)
    result = run_llm_tagging(InputSpec(str(corpus)), tmp_path / "tags", options, progress=False)
    rows = _rows(result.tags_dir)
    assert sorted(r["id"] for r in rows) == ["doc-000", "doc-001", "doc-002"]
    for row in rows:
        assert row["classifier"] == "llm_v1" and row["model"] == str(tiny_model)
        assert row["prompt_version"].startswith("llm_v1-")
        assert [a["question"] for a in row["llm_answers"]] == list(BEHAVIOR_NAMES)
        # A random model's answers: whatever it says must not become a fabricated count.
        for behavior in BEHAVIOR_NAMES:
            answer = next(a["answer"] for a in row["llm_answers"] if a["question"] == behavior)
            try:
                expected = parse_count(answer, behavior)
            except ParseError:
                expected = None
            assert row[behavior] == expected
        if any(row[b] is None for b in BEHAVIOR_NAMES):
            assert row["error"].startswith("parse: ")
        assert row["truncated"] and row["prompt_tokens"] > 0
    assert result.requests == 12 and result.prompt_tokens > 0
    rejects = (result.tags_dir / "rejects").glob("*.jsonl")
    assert any("malformed_json" in p.read_text() for p in rejects)
    assert not list(result.tags_dir.rglob("*.partial"))


RESUME_SCRIPT = """
import sys
from curate.pipelines.llm_tag import LLMTagOptions, run_llm_tagging
from curate.pipelines.readers import InputSpec
options = LLMTagOptions(model=sys.argv[1], backend="transformers", device="cpu", mode="joint", max_doc_tokens=48,
                        max_answer_tokens=6, records_per_chunk=2, concurrency=1)
run_llm_tagging(InputSpec(sys.argv[2]), sys.argv[3], options, progress=False)
"""


def _successful_requests(stats_file: Path) -> int:
    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "successful_requests":
                    yield value["total"] if isinstance(value, dict) else value
                else:
                    yield from walk(value)
        elif isinstance(node, list):
            for item in node:
                yield from walk(item)

    return int(sum(walk(json.loads(stats_file.read_text()))))


@pytest.mark.skipif(not HAS_SERVE, reason="transformers[serving] not installed (pip install 'curate[serve]')")
def test_killed_run_resumes_and_labels_every_document_once(tiny_model, tmp_path):
    n = 6
    corpus = _corpus(tmp_path, n)
    tags = tmp_path / "tags"
    out = tags / "llm_v1"
    command = [sys.executable, "-c", RESUME_SCRIPT, str(tiny_model), str(corpus), str(tags)]
    process = subprocess.Popen(command, cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        marker = out / "_checkpoints" / "last_chunk" / "00000.txt"
        while not marker.exists() and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        assert process.poll() is None, "the run finished before it could be killed; the test needs more documents"
        assert marker.exists()
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # the server shares the session: it dies too
        process.wait()
    first_files = sorted(p.name for p in out.glob("attributes_*.parquet"))
    assert first_files, "at least one chunk finished before the kill"
    done_before = len(_rows(out))
    assert done_before < n

    second = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr[-2000:]
    rows = _rows(out)
    ids = [r["id"] for r in rows]
    assert sorted(ids) == [f"doc-{i:03d}" for i in range(n)]  # every document exactly once
    assert all(r["llm_answers"][0]["question"] == JOINT for r in rows)
    # The rerun asked only for what the first run had not finished.
    assert _successful_requests(out / "_logs" / "stats" / "00000.json") <= n - done_before
    assert not list(out.rglob("*.partial"))


@pytest.mark.parametrize(
    "answer, behavior, expected",
    [("backtracking: 1", "backtracking", 1), ("Count: backtracking = 3", "backtracking", 3),
     ("Subgoal setting: 2", "subgoal_setting", 2), ("**backward_chaining** - 0", "backward_chaining", 0)],
)
def test_parse_count_reads_an_echoed_question(answer, behavior, expected):
    assert parse_count(answer, behavior) == expected
