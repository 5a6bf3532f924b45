"""LLM tagging against a server that fails on purpose (500s, stalls past the timeout, dropped
connections, empty and truncated JSON): the run completes, every document gets exactly one row,
retries stay bounded, and every failure is recorded on its document as null counts with a reason."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from curate.behaviors import BEHAVIOR_NAMES
from curate.pipelines.llm_tag import LLMTagOptions, run_llm_tagging
from curate.pipelines.readers import InputSpec
from tests.support.fault_server import FaultServer
from tests.support.shared import sample_texts

RATES = {"error_500": 0.12, "stall": 0.05, "drop": 0.08, "empty": 0.1, "truncated": 0.1}
MAX_ATTEMPTS = 6  # datatrove's _send_request: at most this many tries per request


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from tests.support.tiny_model import make_tiny_chat_model

    return make_tiny_chat_model(tmp_path_factory.mktemp("tiny") / "model")


def test_faulty_server_run_completes_with_every_failure_recorded(tiny_model, tmp_path):
    texts = sample_texts()
    corpus = tmp_path / "corpus.jsonl"
    n = 8
    corpus.write_text("".join(json.dumps({"id": f"d{i:02d}", "text": texts[i]}) + "\n" for i in range(n)))
    with FaultServer(RATES, stall_seconds=3.0, seed=7) as server:
        options = LLMTagOptions(model=str(tiny_model), backend="endpoint", endpoint_url=server.url, max_doc_tokens=64,
                                max_answer_tokens=8, request_timeout=1.0, concurrency=32, records_per_chunk=8)
        result = run_llm_tagging(InputSpec(str(corpus)), tmp_path / "tags", options, progress=False)
        outcomes = dict(server.outcomes)

    rows = [r for f in sorted(result.tags_dir.glob("attributes_*.parquet")) for r in pq.read_table(f).to_pylist()]
    assert sorted(r["id"] for r in rows) == [f"d{i:02d}" for i in range(n)]
    requests = n * len(BEHAVIOR_NAMES)
    served = sum(outcomes.values())
    assert requests <= served <= requests * MAX_ATTEMPTS
    assert all(outcomes.get(fault, 0) > 0 for fault in RATES), outcomes  # every fault was exercised

    answers = [(row, a) for row in rows for a in row["llm_answers"]]
    assert len(answers) == requests
    # A request that got an answer (even an empty or cut one) is not retried: each such answer is one
    # of the server's empty/truncated outcomes, and becomes a null count with a parse reason.
    bad_json = [(row, a) for row, a in answers if a["answer"] in ("", '{"count": ')]
    assert len(bad_json) == outcomes["empty"] + outcomes["truncated"]
    for row, answer in bad_json:
        assert row[answer["question"]] is None and "parse:" in row["error"]
    # Transport failures are retried; one that exhausted its attempts is an error answer with its reason.
    gave_up = [(row, a) for row, a in answers if a["finish_reason"] == "error"]
    assert len(gave_up) <= outcomes["error_500"] + outcomes["stall"] + outcomes["drop"]
    for row, answer in gave_up:
        assert row[answer["question"]] is None and "request:" in row["error"]
    for row, answer in answers:
        if answer["answer"] == json.dumps({"count": 1}):
            assert row[answer["question"]] == 1
    for row in rows:
        assert (row["error"] is None) == all(row[b] is not None for b in BEHAVIOR_NAMES)
