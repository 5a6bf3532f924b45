"""curate cpt: matched enriched / minimized sets, the rewrite parser on realistic outputs, the rewrite path on a
tiny random model through `transformers serve`, exports and packing round trips, on the sample corpus and real data."""

from __future__ import annotations

import json
import random
from pathlib import Path

import duckdb
import numpy as np
import pyarrow.parquet as pq
import pytest

from curate.builders.cpt import (
    Candidate,
    CPTError,
    CPTSelection,
    RewriteOptions,
    RewriteParseError,
    load_packed_tokens,
    load_tokenizer,
    match_pools,
    pack_dataset,
    parse_rewrite,
    parse_token_count,
    run_cpt,
)
from curate.pipelines.readers import InputSpec
from curate.pipelines.tag import run_tagging
from tests.support.shared import assert_family_card
from tests.support.shared import HAS_SERVE

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "curate" / "sample_data" / "corpus" / "*.jsonl")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from tests.support.tiny_model import make_tiny_chat_model

    return str(make_tiny_chat_model(tmp_path_factory.mktemp("tiny") / "model"))


@pytest.fixture(scope="module")
def sample_tags(tmp_path_factory):
    result = run_tagging(InputSpec(SAMPLE), tmp_path_factory.mktemp("tags"), "cues", progress=False)
    return result.tags_dir


def _ids(folder: Path) -> list[str]:
    return pq.read_table(folder / "data", columns=["id"]).column("id").to_pylist()


def _tokens(folder: Path) -> int:
    return sum(pq.read_table(folder / "data", columns=["n_tokens"]).column("n_tokens").to_pylist())


# --------------------------------------------------------------------------------------------- #
# Parsing and matching
# --------------------------------------------------------------------------------------------- #
def test_parse_token_count():
    assert parse_token_count("8.3M") == 8_300_000 and parse_token_count("500k") == 500_000
    assert parse_token_count("2000") == 2000 and parse_token_count("1.5B") == 1_500_000_000
    for bad in ("lots", "-5", "0"):
        with pytest.raises(CPTError):
            parse_token_count(bad)


WELL_FORMED = [
    ("<question>Find x if 2x + 3 = 11.</question>\n<thoughts>I subtract 3: 2x = 8, so x = 4. Let me check: 2(4) + 3 = 11. "
     "Yes.</thoughts>\n<answer>x = 4</answer>", ("Find x if 2x + 3 = 11.", "I subtract 3", "x = 4")),
    ("<think>The document is about a triangle.</think>\n<question>\nWhat is the altitude to side 14 of the 13-14-15 "
     "triangle?\n</question>\n<thoughts>\n1. The area is 84 by Heron's formula.\n2. The altitude is 2 * 84 / 14.\n"
     "</thoughts>\n<answer>\n12\n</answer>", ("What is the altitude", "Heron", "12")),
    ("Here is the rewrite:\n\n<Question>How many multiples of 3 or 5 are below 100?</Question>\n<Thoughts>First I count "
     "multiples of 3, then of 5, then subtract those of 15.</Thoughts>\n<Answer>46</Answer>\n",
     ("How many multiples", "First I count", "46")),
    ("**Question:** Solve sqrt(x + 7) = x - 5.\n\n**Thoughts:**\nSquaring gives x^2 - 11x + 18 = 0, so x = 2 or x = 9. "
     "Wait, x = 2 gives sqrt(9) = -3, impossible, so I drop it.\n\n**Answer:** x = 9",
     ("Solve sqrt(x + 7) = x - 5.", "Wait, x = 2", "x = 9")),
    ("## Question\nIs the square root of 2 rational?\n## Answer\nNo, it is irrational.", ("Is the square root", "", "No, it is")),
    ("<question>Evaluate 7^100 mod 5.</question><thoughts>7 = 2 mod 5 and 2^4 = 1 mod 5.</thoughts><answer>1",
     ("Evaluate 7^100 mod 5.", "2^4 = 1", "1")),
]
MALFORMED = [
    ("", "stop"),
    ("ĠtheĠofĠandĊĊ<|endoftext|>", "stop"),
    ("<thoughts>I try x = 3 and it fails.</thoughts><answer>4</answer>", "stop"),
    ("<question>Find the area.</question><thoughts>The base is 14 and the", "length"),
    ("<question>Find the area.</question><thoughts>Base times height.</thoughts><answer>84", "length"),
    ("<question></question><answer>84</answer>", "stop"),
    ("The document computes an area of 84.", "stop"),
]


@pytest.mark.parametrize(("output", "expected"), WELL_FORMED)
def test_parse_rewrite_reads_realistic_outputs(output, expected):
    parsed = parse_rewrite(output)
    question, thoughts, answer = expected
    assert parsed["question"].startswith(question) and parsed["answer"].startswith(answer)
    assert thoughts in parsed["thoughts"] if thoughts else parsed["thoughts"] == ""
    assert "<" not in parsed["question"] and "**" not in parsed["answer"]


@pytest.mark.parametrize(("output", "finish_reason"), MALFORMED)
def test_parse_rewrite_rejects_outputs_without_question_or_answer(output, finish_reason):
    with pytest.raises(RewriteParseError):
        parse_rewrite(output, finish_reason)


def test_match_pools_hits_budget_and_length_distribution():
    rng = random.Random(0)
    enriched = [Candidate(f"e{i}", int(rng.lognormvariate(5.5, 0.8)) + 10, rng.choice("ab")) for i in range(3000)]
    minimized = [Candidate(f"m{i}", int(rng.lognormvariate(5.0, 1.0)) + 10, rng.choice("abc")) for i in range(9000)]
    ids_e, ids_m, report = match_pools(enriched, minimized, 200_000, tolerance=0.01)
    lengths = {c.id: c.n_tokens for c in enriched + minimized}
    assert abs(sum(lengths[i] for i in ids_e) - 200_000) <= 2000 and abs(sum(lengths[i] for i in ids_m) - 200_000) <= 2000
    assert report.enriched_tokens == sum(lengths[i] for i in ids_e) and len(set(ids_m)) == len(ids_m)
    # The pools differ (minimized documents are shorter); the matched sets must not.
    unmatched = match_pools(enriched, list(reversed(minimized)), 200_000)[2]
    assert report.ks_statistic < 0.1 and unmatched.ks_statistic < 0.1
    domains = {c.id: c.domain for c in enriched + minimized}
    def share(ids, domain):
        return sum(lengths[i] for i in ids if domains[i] == domain) / sum(lengths[i] for i in ids)

    # Domain c exists only in the minimized pool: at most the last adjustments come from it.
    assert share(ids_m, "c") < 0.01 and abs(share(ids_m, "a") - share(ids_e, "a")) < 0.02
    with pytest.raises(CPTError, match="enriched pool holds"):
        match_pools(enriched[:10], minimized, 200_000)


def test_common_length_range_lowers_ks_when_pools_barely_overlap():
    rng = random.Random(1)
    # Behavior-rich documents are long, behavior-poor ones short: as Sky-T1 traces vs Stack Exchange answers.
    enriched = [Candidate(f"e{i}", int(rng.lognormvariate(7.0, 0.8)) + 10, None) for i in range(4000)]
    # A minimized pool thin at long lengths: stratified filling alone cannot follow the enriched lengths there.
    minimized = [Candidate(f"m{i}", int(rng.lognormvariate(5.0, 0.6)) + 10, None) for i in range(4000)]
    lengths = {c.id: c.n_tokens for c in enriched + minimized}
    reports = {}
    for mode in ("none", "range", "common"):
        ids_e, ids_m, report = match_pools(enriched, minimized, 150_000, tolerance=0.01, length_match=mode, length_trim=0.025)
        # Each set within the 1 % tolerance of the budget (enriched within half of it) and of the other.
        assert abs(report.enriched_tokens - 150_000) <= 750 and abs(report.minimized_tokens - 150_000) <= 1500
        assert abs(report.enriched_tokens - report.minimized_tokens) <= 0.005 * report.enriched_tokens
        assert not set(ids_e) & set(ids_m)
        reports[mode] = report
        if mode != "none":
            low, high = report.length_range
            assert all(low <= lengths[i] <= high for i in ids_e + ids_m)
            outside = {v: sum(not low <= c.n_tokens <= high for c in pool) for v, pool in (("enriched", enriched), ("minimized", minimized))}
            assert report.length_removed == outside and min(outside.values()) > 0
    assert reports["none"].ks_statistic > 0.3 and reports["none"].length_removed == {}
    assert reports["range"].ks_statistic < reports["none"].ks_statistic / 2
    assert reports["common"].ks_statistic < 0.1 and abs(sum(reports["common"].length_weights) - 1) < 1e-9
    with pytest.raises(CPTError, match="length-match"):
        match_pools(enriched, minimized, 150_000, length_match="exact")
    with pytest.raises(CPTError, match="share no token-length range"):
        match_pools([Candidate("e", 5000, None)] * 50, [Candidate("m", 50, None)] * 50, 1000, length_match="common")


# --------------------------------------------------------------------------------------------- #
# End to end on the sample corpus
# --------------------------------------------------------------------------------------------- #
def test_cpt_on_sample_corpus(sample_tags, tiny_model, tmp_path):
    out = tmp_path / "cpt"
    result = run_cpt(sample_tags, InputSpec(SAMPLE), "8k", tiny_model, out, CPTSelection(seed=1), domain_key="topic",
                     pack_length=128, progress=False)
    enriched, minimized = _ids(out / "enriched"), _ids(out / "minimized")
    assert not set(enriched) & set(minimized) and len(set(enriched)) == len(enriched)
    tokens_e, tokens_m = _tokens(out / "enriched"), _tokens(out / "minimized")
    assert abs(tokens_e - 8000) <= 80 and abs(tokens_m - 8000) <= 80 and abs(tokens_e - tokens_m) <= 80
    assert (tokens_e, tokens_m) == (result.report.enriched_tokens, result.report.minimized_tokens)
    # The counts are the named tokenizer's, and the selection obeys the rule.
    tokenizer = load_tokenizer(tiny_model)
    table = pq.read_table(out / "enriched" / "data").to_pylist()
    assert all(len(tokenizer(r["text"], add_special_tokens=False)["input_ids"]) == r["n_tokens"] for r in table)
    assert all(any(r[b] >= 1 for b in ("verification", "backtracking", "subgoal_setting", "backward_chaining")) for r in table)
    assert all(r[b] == 0 for r in pq.read_table(out / "minimized" / "data").to_pylist()
               for b in ("verification", "backtracking", "subgoal_setting", "backward_chaining"))
    card = (out / "enriched" / "README.md").read_text()
    assert "KS statistic" in card and "| seed | `1 (" in card and f"{tokens_e:,} tokens" in card and "Before selection" in card
    # Another seed draws another sample; the same seed the same one.
    again = run_cpt(sample_tags, InputSpec(SAMPLE), "8k", tiny_model, tmp_path / "again", CPTSelection(seed=1),
                    domain_key="topic", export=False, progress=False)
    assert _ids(again.output / "enriched") == enriched
    other = run_cpt(sample_tags, InputSpec(SAMPLE), "8k", tiny_model, tmp_path / "other", CPTSelection(seed=2),
                    export=False, progress=False)
    assert _ids(other.output / "enriched") != enriched
    # Exports: CPT text in parquet and jsonl, packed sequences that give back every document's tokens.
    exports = out / "exports" / "enriched"
    jsonl = [json.loads(l) for l in (exports / "cpt_jsonl" / "train-00000.jsonl").read_text().splitlines()]
    assert [r["id"] for r in jsonl] == enriched and [r["text"] for r in jsonl] == [r["text"] for r in table]
    meta = json.loads((exports / "packed" / "meta.json").read_text())
    sequences = pq.read_table(exports / "packed" / "data").column("input_ids").to_pylist()
    assert all(len(s) == 128 for s in sequences[:-1]) and len(sequences) == meta["sequences"]
    assert meta["tokens"] == tokens_e + len(enriched)  # one EOS per document


def test_too_large_budget_and_k_are_clear_errors(sample_tags, tiny_model, tmp_path):
    with pytest.raises(CPTError, match="enriched pool holds"):
        run_cpt(sample_tags, InputSpec(SAMPLE), "5M", tiny_model, tmp_path / "big", progress=False)
    with pytest.raises(CPTError, match="min-behaviors"):
        CPTSelection(min_behaviors=5)


@pytest.mark.parametrize("fmt", ["parquet", "memmap"])
def test_packing_round_trips_to_the_original_tokens(sample_tags, tiny_model, tmp_path, fmt):
    out = tmp_path / "cpt"
    run_cpt(sample_tags, InputSpec(SAMPLE), "4k", tiny_model, out, export=False, progress=False)
    packed = pack_dataset(out / "minimized", tmp_path / "packed", tiny_model, pack_length=100, fmt=fmt)
    tokenizer = load_tokenizer(tiny_model)
    flat = load_packed_tokens(packed.output)
    index = pq.read_table(packed.output / "index.parquet").to_pylist()
    rows = {r["id"]: r["text"] for r in pq.read_table(out / "minimized" / "data").to_pylist()}
    assert len(flat) == packed.tokens and [r["id"] for r in index] == list(rows)
    for entry in index:
        tokens = list(flat[entry["start"]: entry["start"] + entry["n_tokens"]])
        assert tokens[-1] == tokenizer.eos_token_id
        assert tokens[:-1] == tokenizer(rows[entry["id"]], add_special_tokens=False)["input_ids"]
        assert tokenizer.decode(tokens[:-1]) == rows[entry["id"]]
    if fmt == "memmap":
        assert flat.dtype == np.uint16 and packed.sequences == -(-packed.tokens // 100)


# --------------------------------------------------------------------------------------------- #
# The rewrite on a tiny random model: garbage is counted, never a crash
# --------------------------------------------------------------------------------------------- #
@pytest.mark.skipif(not HAS_SERVE, reason="transformers[serving] not installed (pip install 'curate[serve]')")
def test_rewrite_through_transformers_serve_counts_garbage(sample_tags, tiny_model, tmp_path):
    out = tmp_path / "cpt"
    options = RewriteOptions(model=tiny_model, backend="transformers", device="cpu", max_doc_tokens=48, max_new_tokens=12)
    result = run_cpt(sample_tags, InputSpec(SAMPLE), "1500", tiny_model, out, rewrite=options, pack_length=64,
                     progress=False)
    for variant in ("enriched", "minimized"):
        sources = _ids(out / variant)
        kept = pq.read_table(out / f"{variant}_rewrite" / "data").to_pylist()
        rejects = [json.loads(l) for l in (out / f"{variant}_rewrite" / "rejects" / "rewrite.jsonl").read_text().splitlines()]
        assert result.rewrite.kept[variant] == len(kept)
        assert sum(result.rewrite.dropped[variant].values()) == len(rejects)
        assert sorted([r["id"] for r in kept] + [r["id"] for r in rejects]) == sorted(sources)
        assert all(r["reason"].startswith(("parse:", "request:")) for r in rejects)
        assert all(r["raw"] is not None for r in rejects if r["reason"].startswith("parse:"))
        for row in kept:  # whatever a random model produced, a kept row parsed
            assert row["question"] and row["answer"] and row["completion"].startswith("<think>")
        card = (out / f"{variant}_rewrite" / "README.md").read_text()
        assert f"{len(rejects):,} dropped" in card and "rewrite_v1-" in card
        assert "--rewrite" in assert_family_card(out / f"{variant}_rewrite" / "README.md", "cpt").text


# --------------------------------------------------------------------------------------------- #
# Real data: Sky-T1 long traces (full of "Wait") and Stack Exchange answers
# --------------------------------------------------------------------------------------------- #
def test_cpt_on_shared_data(shared_data, tiny_model, tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    with corpus.open("w") as f:
        for path in sorted((shared_data / "longcot_skythought").glob("*.jsonl")):
            for i, line in enumerate(path.read_text().splitlines()[:60]):
                record = json.loads(line)
                f.write(json.dumps({"id": f"{path.stem}/{i}", "text": record["code"][0], "domain": "trace"}) + "\n")
        for path in sorted((shared_data / "stackexchange_math").glob("*.jsonl")):
            for line in path.read_text().splitlines()[:30]:
                thread = json.loads(line)
                for answer in thread["answers"]:
                    if answer.get("body_text"):
                        f.write(json.dumps({"id": f"se/{answer['id']}", "text": answer["body_text"], "domain": "stackexchange"}) + "\n")
    tags = run_tagging(InputSpec(str(corpus)), tmp_path / "tags", "cues", progress=False).tags_dir
    # This cut of the corpus holds too few behavior-poor documents as long as the traces for a 40k common length
    # range (the error says so); the common range is checked below at a budget it can hold.
    result = run_cpt(tags, InputSpec(str(corpus)), "40k", tiny_model, tmp_path / "out", CPTSelection(min_behaviors=2),
                     tolerance=0.02, export=False, progress=False, length_match="none")
    enriched, minimized = _ids(tmp_path / "out" / "enriched"), _ids(tmp_path / "out" / "minimized")
    assert not set(enriched) & set(minimized)
    tokens_e, tokens_m = _tokens(tmp_path / "out" / "enriched"), _tokens(tmp_path / "out" / "minimized")
    assert abs(tokens_e - 40_000) <= 800 and abs(tokens_m - 40_000) <= 800
    assert 0 <= result.report.ks_statistic <= 1
    with duckdb.connect() as connection:
        wait = connection.sql(f"SELECT avg(CAST(text LIKE '%Wait%' AS INTEGER)) FROM read_parquet('{tmp_path}/out/enriched/data/*.parquet')").fetchall()[0][0]
    assert wait > 0.2  # backtracking-rich traces dominate the enriched set
    with pytest.raises(CPTError, match="inside the common length range"):
        run_cpt(tags, InputSpec(str(corpus)), "40k", tiny_model, tmp_path / "big", CPTSelection(min_behaviors=2),
                tolerance=0.02, export=False, progress=False)

    # Long traces vs short answers: the common length range is what brings the two length distributions together.
    reports = {mode: run_cpt(tags, InputSpec(str(corpus)), "20k", tiny_model, tmp_path / mode, CPTSelection(),
                             tolerance=0.02, export=False, progress=False, length_match=mode).report
               for mode in ("none", "common")}
    common = reports["common"]
    assert abs(common.enriched_tokens - 20_000) <= 200 and abs(common.minimized_tokens - 20_000) <= 400
    assert not set(_ids(tmp_path / "common" / "enriched")) & set(_ids(tmp_path / "common" / "minimized"))
    assert common.ks_statistic < reports["none"].ks_statistic / 2
    card = (tmp_path / "common" / "enriched" / "README.md").read_text()
    summary = json.loads((tmp_path / "common" / ".curate" / "cpt.json").read_text())
    removed = summary["parameters"]["length_removed"]
    assert removed["enriched"] > 0 and removed["minimized"] > 0
    assert f"{removed['enriched']:,} enriched and {removed['minimized']:,} minimized candidates removed" in card
