"""One card family: every builder that writes a README.md card is run here on small data, and its card must load
as the Hub loads it, count its rows right, carry the family's sections, name a reproduce command that the CLI
accepts, and point only at plots that exist."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curate.behaviors import Behavior
from curate.data_cards.cards import reproduce_command, update_card_section
from curate.pipelines.readers import InputSpec
from tests.support.shared import assert_family_card

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "curate" / "sample_data" / "corpus" / "*.jsonl")
HEADINGS = ("## Parameters", "## Fields", "## Load", "## Limitations")
COMMAND = re.compile(r"Reproduce with:\n\n```\n(.*?)\n```", re.DOTALL)
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")




def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def build_behaviors(tmp_path: Path) -> list[Path]:
    from curate.builders.behavior import run_build
    from curate.pipelines.query import Selection
    from tests.support.shared import DOCS

    corpus = _write_jsonl(tmp_path / "corpus.jsonl", [{"id": i, "text": t} for i, t in DOCS])
    result = run_build(InputSpec(str(corpus)), tmp_path / "built", Selection(behaviors=[Behavior.BACKTRACKING]), progress=False)
    return [result.output / "README.md"]


def build_behaviors_deduplicated(tmp_path: Path) -> list[Path]:
    """A card a cleaning step reports into afterwards: the recount after removal must hold."""
    from curate.builders.behavior import run_build
    from curate.pipelines.query import Selection

    docs = [{"id": f"d{i}", "text": f"Wait, that's not right: {i} + {i} is not {3 * i}. Let me try another way."}
            for i in range(3)] + [{"id": "copy", "text": "Wait, that's not right: 0 + 0 is not 0. Let me try another way."}]
    corpus = _write_jsonl(tmp_path / "corpus.jsonl", docs)
    result = run_build(InputSpec(str(corpus)), tmp_path / "built", Selection(behaviors=[Behavior.BACKTRACKING]), dedup=True,
                       progress=False)
    card = (result.output / "README.md").read_text()
    assert "<!-- curate:dedup -->" in card and card.index("## Deduplication") < card.index("## Fields")
    assert "--dedup" in COMMAND.search(card).group(1)
    return [result.output / "README.md"]


def build_priming(tmp_path: Path) -> list[Path]:
    from curate.builders.priming import PrimingConfig, run_priming

    run_priming(PrimingConfig(variant="only_backtracking", n=6, test_n=2, seed=1), tmp_path / "priming", progress=False)
    return [tmp_path / "priming" / "README.md"]


def build_multihop(tmp_path: Path) -> list[Path]:
    from curate.builders.jobs import MultihopJob
    from curate.builders.multihop import run_multihop
    from curate.pipelines.cleaning import Cleaning
    from tests.support.shared import NATALIA_A, NATALIA_Q

    source = _write_jsonl(tmp_path / "problems.jsonl", [
        {"id": "nat", "question": NATALIA_Q, "answer": NATALIA_A},
        {"id": "bags", "question": "Sam has 4 bags of 7 apples. How many apples?", "answer": "<<4*7=28>>28\n#### 28"},
        {"id": "cook", "question": "Bake 36 cookies and eat 8. How many are left?", "answer": "<<36-8=28>>28\n#### 28"},
    ])
    run_multihop(MultihopJob(input=str(source), output=tmp_path / "multihop", n=4, hops="2-2", seed=1,
                             cleaning=Cleaning()), progress=False)
    return [tmp_path / "multihop" / "README.md"]


def build_mcqa(tmp_path: Path) -> list[Path]:
    from curate.builders.jobs import McqaJob
    from curate.builders.mcqa import run_mcqa
    from curate.pipelines.cleaning import Cleaning

    source = _write_jsonl(tmp_path / "mc.jsonl", [
        {"id": "ok", "question": "A shirt costs $20 after a 20% discount. What was the original price in dollars?",
         "options": {"A": "$24", "B": "$25", "C": "$30"}, "answer": "B"},
        {"id": "which", "question": "Which of the following is prime?", "options": {"A": "4", "B": "7"}, "answer": "B"},
    ])
    run_mcqa(McqaJob(inputs=[str(source)], output=tmp_path / "mcqa", cleaning=Cleaning()), progress=False)
    return [tmp_path / "mcqa" / "README.md"]


def build_cpt(tmp_path: Path) -> list[Path]:
    from curate.builders.cpt.run import run_cpt
    from curate.builders.jobs import CPTJob
    from curate.pipelines.cleaning import Cleaning
    from curate.pipelines.tag import run_tagging
    from tests.support.tiny_model import make_tiny_chat_model

    tokenizer = str(make_tiny_chat_model(tmp_path / "model"))
    tags = run_tagging(InputSpec(SAMPLE), tmp_path / "tags", "cues", progress=False).tags_dir
    run_cpt(CPTJob(tags=tags, corpus=InputSpec(SAMPLE), tokens="4k", tokenizer=tokenizer, output=tmp_path / "cpt",
                   cleaning=Cleaning(), export=False), progress=False)
    return [tmp_path / "cpt" / v / "README.md" for v in ("enriched", "minimized")]


def build_export(tmp_path: Path) -> list[Path]:
    from curate.handoff.export import run_export

    source = build_priming(tmp_path)[0].parent
    run_export(source, "verl", tmp_path / "verl", progress=False)
    return [tmp_path / "verl" / "README.md"]


def build_dedup(tmp_path: Path) -> list[Path]:
    from curate.pipelines.dedup import dedup

    text = "Let me double-check: 3 * 16 = 48, which matches the target of the whole puzzle we set."
    corpus = _write_jsonl(tmp_path / "corpus.jsonl", [{"id": "a", "text": text}, {"id": "b", "text": text.upper()},
                                                      {"id": "c", "text": "A group is abelian when it commutes."}])
    result = dedup(str(corpus), tmp_path / "deduped", progress=False)
    assert result.exact_removed == 1
    return [tmp_path / "deduped" / "README.md"]


def build_decontam(tmp_path: Path) -> list[Path]:
    from curate.pipelines.decontam import decontaminate

    leaked = "Natalia sold clips to 48 of her friends in April and then she sold half as many clips in May"
    benchmark = _write_jsonl(tmp_path / "bench.jsonl", [{"id": "b1", "question": leaked}])
    corpus = _write_jsonl(tmp_path / "corpus.jsonl", [{"id": "x", "text": f"Copied: {leaked}."},
                                                      {"id": "y", "text": "A group is abelian when it commutes."}])
    result = decontaminate(str(corpus), tmp_path / "clean", f"{benchmark}=question", progress=False)
    assert result.removed == 1
    return [tmp_path / "clean" / "README.md"]


def build_passrate(tmp_path: Path) -> list[Path]:
    """Selection over real rate shards and the card the filter writes; sampling itself needs a served model and is
    covered end to end in test_passrate (whose card is checked with assert_family_card there)."""
    from curate.handoff.passrate import (
        SamplingOptions,
        row_key,
        select_by_pass_rate,
        write_passrate_card,
    )
    from tests.support.shared import PASSRATE_ROWS, write_rates_shard

    dataset = tmp_path / "ds"
    (dataset / "data").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(PASSRATE_ROWS[:4]), dataset / "data" / "train-00000.parquet")
    output = tmp_path / "pr"
    write_rates_shard(output, {row_key(0, 0): [1.0, 0.0], row_key(0, 1): [1.0, 1.0], row_key(0, 2): [0.0, 1.0]})
    result = select_by_pass_rate(dataset, output, (0.0, 1.0), progress=False)
    write_passrate_card(result, dataset, SamplingOptions(model="org/policy", k=2), limit=-1)
    return [output / "README.md"]


BUILDERS = {
    "build": (build_behaviors, "build"),
    "build --dedup": (build_behaviors_deduplicated, "build"),
    "priming": (build_priming, "priming"),
    "multihop": (build_multihop, "multihop"),
    "mcqa": (build_mcqa, "mcqa"),
    "cpt": (build_cpt, "cpt"),
    "export": (build_export, "export"),
    "dedup": (build_dedup, "dedup"),
    "decontam": (build_decontam, "decontam"),
    "filter-passrate": (build_passrate, "filter-passrate"),
}


@pytest.mark.parametrize("builder", list(BUILDERS))
def test_every_card_is_of_the_family(builder, tmp_path):
    make, subcommand = BUILDERS[builder]
    for path in make(tmp_path):
        assert_family_card(path, subcommand)
        assert not list(path.parent.glob("*.partial*"))


def test_a_report_section_is_replaced_not_repeated_and_a_hand_written_card_is_kept(tmp_path):
    card = build_priming(tmp_path)[0]
    update_card_section(card.parent, "dedup", "## Deduplication\n\nearlier run")
    update_card_section(card.parent, "dedup", "## Deduplication\n\nlater run")
    text = card.read_text()
    assert text.count("## Deduplication") == 1 and "later run" in text and "earlier run" not in text
    assert_family_card(card, "priming")
    # A card curate did not write (no curate metadata) only gets the section, and is not refused.
    (card.parent / "README.md").write_text("---\nlicense: mit\n---\n\n# Mine\n")
    update_card_section(card.parent, "dedup", "## Deduplication\n\nby hand")
    assert (card.parent / "README.md").read_text().startswith("---\nlicense: mit\n---\n\n# Mine\n")


def test_reproduce_command_writes_flags_in_order_and_leaves_out_unset_ones():
    line = reproduce_command("export", Path("my data"), options=[
        ("--to", "verl"), ("--limit", 0), ("--instruction", ""), ("--system", None), ("--rewrite", True),
        ("--require-solution", False), ("--band", "0.1,0.9")], dedup=True, decontam="gsm8k", benchmarks_dir="/b")
    assert shlex.split(line) == ["curate", "export", "my data", "--to", "verl", "--limit", "0", "--instruction", "",
                                 "--rewrite", "--band", "0.1,0.9", "--dedup", "--decontam", "gsm8k",
                                 "--benchmarks-dir", "/b"]
