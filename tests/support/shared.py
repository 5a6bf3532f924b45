"""Constants and small helpers used by more than one test module."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import typer

from curate.classifiers import resolve_name
from curate.cli import app
from curate.data_cards.cards import check_card, size_category
from curate.handoff.passrate import RATES_SCHEMA, pass_counts

ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = Path(os.environ.get("CURATE_SHARED_DATA", ROOT.parent / "shared" / "data"))
SAMPLE = ROOT / "curate" / "sample_data" / "corpus"
HEADINGS = ("## Parameters", "## Fields", "## Load", "## Limitations")
COMMAND = re.compile(r"Reproduce with:\n\n```\n(.*?)\n```", re.DOTALL)
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")
# The version `--classifier cues` (the default) resolves to: the folder a default `curate tag` writes.
DEFAULT_CUES = resolve_name("cues")[0]

def assert_family_card(path: Path, subcommand: str):
    """The checks every generated card must pass; returns the loaded card."""
    card = check_card(path)
    rows = sum(pq.ParquetFile(f).metadata.num_rows for f in (path.parent / "data").glob("*.parquet"))
    assert card.data.size_categories == [size_category(rows)], f"{rows} rows"
    for heading in HEADINGS:
        assert f"\n{heading}\n" in card.text, heading
    commands = COMMAND.findall(card.text)
    assert len(commands) == 1
    argv = shlex.split(commands[0])
    assert argv[:2] == ["curate", subcommand]
    # The command must parse as that subcommand's options: a renamed or made-up option fails here.
    group = typer.main.get_command(app)
    command = group.get_command(group.make_context("curate", ["--help"], resilient_parsing=True), subcommand)
    command.make_context(subcommand, argv[2:])
    for plot in IMAGE.findall(card.text):
        assert (path.parent / plot).is_file(), plot
    for config in card.data.configs:
        for files in config["data_files"]:
            assert list(path.parent.glob(files["path"])), files["path"]
    return card


HAS_SERVE = shutil.which("transformers", path=str(Path(sys.executable).parent)) is not None


HAS_RAY = __import__("importlib").util.find_spec("ray") is not None


def sample_records() -> list[dict]:
    """The sample corpus's JSON records that hold a text, in file order."""
    records = []
    for path in sorted(SAMPLE.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and isinstance(record.get("text"), str):
                records.append(record)
    return records


def sample_texts() -> list[str]:
    return [r["text"] for r in sample_records() if r["text"].strip()]


PASSRATE_ROWS = [
    {"id": "m1", "question": "What is 1/2 + 1/4?", "answer": "\\frac{3}{4}", "data_source": "curate/math", "ability": "math"},
    {"id": "m2", "question": "Solve x^2 = 64 for x.", "answer": "\\pm 8", "data_source": "curate/math", "ability": "math"},
    {"id": "m3", "question": "Name the interval where x^2 < 4.", "answer": "(-2, 2)", "data_source": "curate/math", "ability": "math"},
    {"id": "bad-source", "question": "Write a poem.", "answer": "roses", "data_source": "curate/poetry", "ability": "art"},
    {"id": "bad-question", "question": "  ", "answer": "1", "data_source": "curate/math", "ability": "math"},
    {"id": "m4", "question": "How many primes are below 10?", "answer": "4", "data_source": "curate/math", "ability": "math"},
]


def write_rates_shard(output: Path, rates: dict[str, list[float | None]]) -> None:
    rows = []
    for key, rewards in rates.items():
        scored, correct, rate = pass_counts(rewards)
        rows.append({"key": key, "id": key, "split": "train", "data_source": "curate/math", "k": len(rewards),
                     "scored": scored, "correct": correct, "pass_rate": rate, "prompt_tokens": 10, "completion_tokens": 20,
                     "samples": [{"text": "…", "reward": r, "finish_reason": "stop", "error": None} for r in rewards]})
    (output / "rates").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=RATES_SCHEMA), output / "rates" / "rates_00000_0.parquet")


NATALIA_Q = (
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May?"
)


NATALIA_A = (
    "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
    "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72"
)


DOCS = [
    ("d-back", "Wait, that's not right. 75 - 25 = 50, not 48. Let me try another combination."),
    ("d-verify", "Let me double-check: 3 * 16 = 48, which matches the target."),
    ("d-both", "Oops, I made a mistake: the sign flips. Plugging x = 2 back in gives 0, as required."),
    ("d-plain", "The area of a circle of radius r is pi r squared."),
    ("d-plain2", "A group is abelian when its operation is commutative."),
]
