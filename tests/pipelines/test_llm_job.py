"""The one rule of an LLM job's folder: the same configuration resumes, another is refused with the fix, and
overwrite starts over."""

import json

import pytest

from curate.pipelines.llm.job import JobConfigChangedError, claim_job


def test_unchanged_config_resumes_changed_is_refused_and_overwrite_starts_over(tmp_path):
    stage = tmp_path / "stage"
    record = stage / "config.json"
    claim_job(record, {"model": "a", "k": 2}, "samples", "pass --overwrite to sample again")
    (stage / "checkpoints").mkdir()
    (stage / "checkpoints" / "chunk_0.jsonl").write_text("{}")

    claim_job(record, {"model": "a", "k": 2}, "samples", "pass --overwrite to sample again")
    assert (stage / "checkpoints" / "chunk_0.jsonl").exists()  # resumed: nothing removed

    with pytest.raises(JobConfigChangedError, match=r'model: "a" -> "b".*pass --overwrite to sample again'):
        claim_job(record, {"model": "b", "k": 2}, "samples", "pass --overwrite to sample again")
    assert (stage / "checkpoints" / "chunk_0.jsonl").exists() and json.loads(record.read_text())["model"] == "a"

    claim_job(record, {"model": "b", "k": 2}, "samples", "pass --overwrite to sample again", overwrite=True)
    assert not (stage / "checkpoints").exists() and json.loads(record.read_text())["model"] == "b"
