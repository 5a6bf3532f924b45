"""A stand-in for the Hugging Face Hub's HTTP API, and a dataset folder to publish to it."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from huggingface_hub import DatasetCard, DatasetCardData

from tests.support.http_standin import JsonHandler, StandInServer


class _HubHandler(JsonHandler):
    server: StandInHub

    def _handle(self, method: str) -> None:
        hub = self.server
        path = self.path.split("?")[0]
        hub.requests.append((method, path))
        hub.authorizations.add(self.headers.get("Authorization", ""))
        body = self.read_body()
        for suffix, statuses in hub.failures.items():
            if path.endswith(suffix) and statuses:
                self.reply_json(statuses.pop(0), {"error": "stand-in failure"})
                return
        if method == "POST" and path == "/api/repos/create":
            payload = json.loads(body)
            repo = f"{payload['organization']}/{payload['name']}"
            if repo in hub.repos:
                self.reply_json(409, {"error": "You already created this dataset repo",
                                  "url": f"{hub.endpoint}/datasets/{repo}"})
                return
            hub.repos[repo] = {".gitattributes": b"*.parquet filter=lfs\n"}
            hub.private[repo] = payload.get("visibility") == "private" or bool(payload.get("private"))
            self.reply_json(200, {"url": f"{hub.endpoint}/datasets/{repo}", "name": repo})
            return
        if method == "POST" and path == "/api/validate-yaml":
            content = json.loads(body)["content"]
            try:
                DatasetCard(content)
            except Exception as error:  # noqa: BLE001 - any card the hub's parser refuses is a 400, as on the hub
                self.reply_json(400, {"errors": [{"message": str(error)}]})
                return
            self.reply_json(200, {"errors": [], "warnings": []})
            return
        match = re.match(r"^/api/datasets/([^/]+/[^/]+)/(tree|preupload|commit)/([^/]+)", path)
        if not match or match.group(1) not in hub.repos:
            self.reply_json(404, {"error": "Repository not found"})
            return
        repo, action = match.group(1), match.group(2)
        files = hub.repos[repo]
        if action == "tree":
            self.reply_json(200, [{"type": "file", "path": p, "size": len(c), "oid": hashlib.sha1(c).hexdigest()}
                              for p, c in files.items()])
        elif action == "preupload":
            listed = json.loads(body)["files"]
            self.reply_json(200, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                                        for f in listed]})
        else:
            for line in body.splitlines():
                item = json.loads(line)
                if item["key"] == "file":
                    files[item["value"]["path"]] = base64.b64decode(item["value"]["content"])
                elif item["key"] == "deletedFile":
                    files.pop(item["value"]["path"], None)
            self.reply_json(200, {"commitUrl": f"{hub.endpoint}/datasets/{repo}/commit/{'a' * 40}",
                              "commitOid": "a" * 40})

    def do_GET(self):
        self._handle("GET")

    def do_POST(self):
        self._handle("POST")


TOKEN = "hf_test_secret_token_123"


class StandInHub(StandInServer):
    def __init__(self):
        super().__init__(_HubHandler)
        self.repos: dict[str, dict[str, bytes]] = {}
        self.private: dict[str, bool] = {}
        self.requests: list[tuple[str, str]] = []
        self.failures: dict[str, list[int]] = {}  # path suffix -> status codes to answer first, in order
        self.authorizations: set[str] = set()


def make_dataset(directory: Path, rows: int = 30, size_categories=("n<1K",), configs=None, extra_yaml: dict | None = None,
                 text: str = "# A dataset\n\n![plot](plot.png)\n") -> Path:
    """A dataset in curate's layout: data/train-*.parquet, README.md card, rejects/, .curate/ bookkeeping."""
    (directory / "data").mkdir(parents=True)
    half = rows // 2
    for index, (start, stop) in enumerate([(0, half), (half, rows)]):
        table = pa.table({"id": [f"q{i}" for i in range(start, stop)], "question": [f"What is {i} + 1?" for i in range(start, stop)],
                          "answer": [str(i + 1) for i in range(start, stop)], "data_source": ["curate/math"] * (stop - start),
                          "ability": ["math"] * (stop - start)})
        pq.write_table(table, directory / "data" / f"train-{index:05d}.parquet")
    (directory / "plot.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
    (directory / "rejects").mkdir()
    (directory / "rejects" / "rejects_00000.jsonl").write_text(json.dumps({"reason": "no answer", "raw": "?"}) + "\n")
    (directory / ".curate").mkdir()
    (directory / ".curate" / "parameters.json").write_text("{}")
    data = DatasetCardData(
        license="mit", task_categories=["question-answering"], size_categories=list(size_categories),
        configs=configs or [{"config_name": "default", "data_files": [{"split": "train", "path": "data/train-*.parquet"}]}],
        **(extra_yaml or {}),
    )
    DatasetCard(f"---\n{data.to_yaml()}\n---\n{text}").save(directory / "README.md")
    return directory
