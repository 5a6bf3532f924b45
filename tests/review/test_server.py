"""The review page's API refuses what would put a wrong line in the labels file, and serves its text as JSON segments
that cover the document exactly, under a policy that allows only its own scripts."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

from curate.pipelines.readers import InputSpec
from curate.review.sample import create_sample
from curate.review.server import make_app
from tests.review.test_sample import tagged  # noqa: F401  (the fixture)


def test_labels_that_are_not_0_or_1_or_name_a_span_the_document_lacks_are_refused(tagged):  # noqa: F811
    folder, texts = tagged
    create_sample(folder / "tags", InputSpec(str(folder / "corpus.jsonl")), folder / "review", sample=6, seed=0)
    client = TestClient(make_app(folder / "review", max_chars=20))
    page = client.get("/")
    assert "script-src 'self'" in page.headers["content-security-policy"] and "<script src=" in page.text
    doc = client.get("/api/doc/0").json()
    assert "".join(part["text"] for part in doc["segments"]) == texts[doc["id"]][:20] and doc["cut"]
    assert client.get("/api/doc/6").status_code == 404
    answer = {"position": 0, "labels": {"verification": 2}}
    assert client.post("/api/label", json=answer).status_code == 422
    answer = {"position": 0, "labels": {"verification": 1}, "wrong_spans": [{"behavior": "backtracking", "start": 0,
                                                                            "end": 3}]}
    assert client.post("/api/label", json=answer).status_code == 422
    assert not (folder / "review" / "labels.jsonl").exists()
    state = client.post("/api/label", json={"position": 0, "labels": {"verification": 1}}).json()
    assert (state["read"], state["next"]) == (1, 1)
    line = json.loads((folder / "review" / "labels.jsonl").read_text())
    assert line["id"] == doc["id"] and line["labels"]["verification"] == 1 and line["labels"]["backtracking"] == 0
