"""The held-out behaviour set (evals/heldout): well-formed, disjoint from the dev set, and resolvable."""

import json
from collections import Counter
from pathlib import Path

import pytest

from curate.behaviors import BEHAVIOR_NAMES
from evals.devset.resolve import LABELS_PATH as DEV_LABELS
from evals.devset.resolve import DevsetUnavailable, load_devset

HELDOUT = Path(__file__).resolve().parents[2] / "evals" / "heldout" / "labels.jsonl"


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_labels_are_well_formed_split_and_disjoint_from_the_dev_set():
    items = read(HELDOUT)
    assert len({item["id"] for item in items}) == len(items)
    assert {item["split"] for item in items} == {"tune", "test"}
    halves = Counter(item["split"] for item in items)
    assert abs(halves["tune"] - halves["test"]) <= 1
    for behavior in BEHAVIOR_NAMES:
        assert sum(item["labels"][behavior] for item in items) >= 20, behavior
        for half in ("tune", "test"):
            assert any(item["labels"][behavior] for item in items if item["split"] == half), (behavior, half)

    def key(item):
        loc = item["locator"]
        return item["source"], loc["row"], tuple(loc["path"]), loc.get("start"), loc.get("end")

    dev = read(DEV_LABELS)
    assert not {key(item) for item in items} & {key(item) for item in dev}
    assert not {item["locator"]["sha256"] for item in items} & {item["locator"]["sha256"] for item in dev}


def test_every_text_resolves_with_its_checksum():
    try:
        items = load_devset(labels_path=HELDOUT)
    except DevsetUnavailable as error:
        pytest.skip(f"shared data not available: {error}")
    assert len(items) == len(read(HELDOUT))
    assert all(item["text"].strip() and item["split"] in ("tune", "test") for item in items)
    # The JSON-array source (LLM-Adapters) resolves by list index.
    assert any(item["source"].startswith("llm_adapters/") for item in items)
