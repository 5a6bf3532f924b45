"""A tokenizer already on disk loads without asking the hub: offline, asking cost ~50 s of retries per load."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.http_standin import JsonHandler, StandInServer
from tests.support.tiny_model import make_tiny_chat_model

REPO = "curate-test/tiny-tokenizer"
REVISION = "0123456789abcdef0123456789abcdef01234567"


class RecordingHub(JsonHandler):
    """A hub that has nothing: every request is recorded and answered 404."""

    def _record(self) -> None:
        self.server.requests.append((self.command, self.path))
        self.reply_json(404, {"error": "not here"})

    do_GET = do_HEAD = _record


def asked_for(hub: StandInServer, repo: str) -> list:
    """The requests for `repo`'s files (huggingface_hub also fetches a registry of its own, once a day)."""
    return [request for request in hub.requests if repo in request[1]]


def cached_repo(tmp_path: Path) -> Path:
    """The hub cache's layout for REPO (what a download leaves), holding a tiny model's tokenizer."""
    model = make_tiny_chat_model(tmp_path / "model")
    cache = tmp_path / "hub"
    snapshot = cache / f"models--{REPO.replace('/', '--')}" / "snapshots" / REVISION
    snapshot.mkdir(parents=True)
    for path in model.iterdir():
        if path.name.startswith(("tokenizer", "special_tokens", "config", "chat_template")):
            shutil.copy(path, snapshot / path.name)
    refs = snapshot.parents[1] / "refs"
    refs.mkdir()
    (refs / "main").write_text(REVISION)
    return cache


def load_in_a_fresh_process(cache: Path, endpoint: str, code: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    env.update(HF_HUB_CACHE=str(cache), HF_ENDPOINT=endpoint, HF_HUB_ETAG_TIMEOUT="2")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)


def test_a_cached_hub_tokenizer_loads_without_a_request(tmp_path):
    cache = cached_repo(tmp_path)
    with StandInServer(RecordingHub) as hub:
        hub.requests = []
        ours = load_in_a_fresh_process(cache, hub.endpoint, "import json; from curate.hf_tokenizers import "
                                       f"load_tokenizer; print(json.dumps(load_tokenizer({REPO!r})('Check').input_ids))")
        assert ours.returncode == 0, ours.stderr
        assert json.loads(ours.stdout.splitlines()[-1]), ours.stdout
        assert asked_for(hub, REPO) == []
        # transformers' own call on the same cache asks the hub first: the requests the loader saves.
        plain = load_in_a_fresh_process(cache, hub.endpoint, "from transformers import AutoTokenizer; "
                                        f"AutoTokenizer.from_pretrained({REPO!r})")
        assert asked_for(hub, REPO), plain.stderr


def test_a_tokenizer_on_disk_nowhere_still_fails_with_transformers_error(tmp_path):
    with StandInServer(RecordingHub) as hub:
        hub.requests = []
        missing = load_in_a_fresh_process(tmp_path / "empty-cache", hub.endpoint,
                                          "from curate.hf_tokenizers import load_tokenizer; "
                                          "load_tokenizer('curate-test/not-there')")
    assert missing.returncode != 0 and "OSError" in missing.stderr
    assert asked_for(hub, "curate-test/not-there"), "a tokenizer that is not on disk is asked of the hub"
