"""curate cpt: matched enriched / minimized sets, the rewrite parser on realistic outputs, the rewrite path on a
tiny random model through `transformers serve`, exports and packing round trips, on the sample corpus and real data."""

from __future__ import annotations

import json
import random
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curate.builders.cpt.common import CPTError, load_tokenizer, parse_token_count
from curate.builders.cpt.judge import SolutionJudgeOptions
from curate.builders.cpt.matching import Candidate, best_effort_targets, ks_statistic, match_pools
from curate.builders.cpt.packing import load_packed_tokens, pack_dataset
from curate.builders.cpt.rewrite import (
    RewriteOptions,
    RewriteParseError,
    RewriteResult,
    parse_rewrite,
    rematch_rewrites,
)
from curate.builders.cpt.run import run_cpt
from curate.builders.cpt.selection import CPTSelection
from curate.builders.jobs import CPTJob
from curate.classifiers.solution import CUE_VERSION
from curate.options import ServerFields
from curate.pipelines.cleaning import Cleaning
from curate.pipelines.readers import InputSpec
from curate.pipelines.tag import run_tagging
from tests.support.scripted_server import ScriptedServer, verdict
from tests.support.shared import HAS_SERVE, assert_family_card

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "curate" / "sample_data" / "corpus" / "*.jsonl")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from tests.support.tiny_model import make_tiny_chat_model

    return str(make_tiny_chat_model(tmp_path_factory.mktemp("tiny") / "model"))


@pytest.fixture(scope="module")
def sample_tags(tmp_path_factory):
    # A pinned version, not the default: the budget tests below fill exact token windows from ~200-token documents,
    # a subset-sum that holds for this version's enriched pool and need not for another's.
    result = run_tagging(InputSpec(SAMPLE), tmp_path_factory.mktemp("tags"), "cues_v3", progress=False)
    return result.tags_dir


def cpt_job(tags: Path, texts: str, tokens: str | int, tokenizer: str, output: Path, **fields) -> CPTJob:
    """The job `curate cpt` runs for these options, every other option at its default."""
    return CPTJob(tags=tags, corpus=InputSpec(texts), tokens=tokens, tokenizer=tokenizer, output=output,
                  cleaning=Cleaning(), **fields)


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
    (("<question>Find x if 2x + 3 = 11.</question>\n<thoughts>I subtract 3: 2x = 8, so x = 4. Let me check: 2(4) + 3 = 11. "
     "Yes.</thoughts>\n<answer>x = 4</answer>"), ("Find x if 2x + 3 = 11.", "I subtract 3", "x = 4")),
    (("<think>The document is about a triangle.</think>\n<question>\nWhat is the altitude to side 14 of the 13-14-15 "
     "triangle?\n</question>\n<thoughts>\n1. The area is 84 by Heron's formula.\n2. The altitude is 2 * 84 / 14.\n"
     "</thoughts>\n<answer>\n12\n</answer>"), ("What is the altitude", "Heron", "12")),
    (("Here is the rewrite:\n\n<Question>How many multiples of 3 or 5 are below 100?</Question>\n<Thoughts>First I count "
     "multiples of 3, then of 5, then subtract those of 15.</Thoughts>\n<Answer>46</Answer>\n"),
     ("How many multiples", "First I count", "46")),
    (("**Question:** Solve sqrt(x + 7) = x - 5.\n\n**Thoughts:**\nSquaring gives x^2 - 11x + 18 = 0, so x = 2 or x = 9. "
     "Wait, x = 2 gives sqrt(9) = -3, impossible, so I drop it.\n\n**Answer:** x = 9"),
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
    for mode in ("none", "range", "strict", "best"):
        ids_e, ids_m, report = match_pools(enriched, minimized, 150_000, tolerance=0.01, length_match=mode, length_trim=0.025)
        # Each set within the 1 % tolerance of the budget (enriched within half of it) and of the other.
        assert abs(report.enriched_tokens - 150_000) <= 750 and abs(report.minimized_tokens - 150_000) <= 1500
        assert abs(report.enriched_tokens - report.minimized_tokens) <= 0.005 * report.enriched_tokens
        assert not set(ids_e) & set(ids_m)
        reports[mode] = report
        if mode in ("range", "strict"):
            low, high = report.length_range
            assert all(low <= lengths[i] <= high for i in ids_e + ids_m)
            outside = {v: sum(not low <= c.n_tokens <= high for c in pool) for v, pool in (("enriched", enriched), ("minimized", minimized))}
            assert report.length_removed == outside and min(outside.values()) > 0
    assert reports["none"].ks_statistic > 0.3 and reports["none"].length_removed == {}
    assert reports["range"].ks_statistic < reports["none"].ks_statistic / 2
    assert reports["strict"].ks_statistic < 0.1 and abs(sum(reports["strict"].length_weights) - 1) < 1e-9
    # best cuts nothing: every length stays eligible, and it still brings the distributions together.
    assert reports["best"].length_range is None and reports["best"].ks_statistic < reports["none"].ks_statistic / 2
    with pytest.raises(CPTError, match="length-match"):
        match_pools(enriched, minimized, 150_000, length_match="exact")
    for strict in ("strict", "common"):  # `common` is the old name of `strict`
        with pytest.raises(CPTError, match="share no token-length range"):
            match_pools([Candidate("e", 5000, None)] * 50, [Candidate("m", 50, None)] * 50, 1000, length_match=strict)


def test_best_effort_targets_share_what_both_pools_hold_and_place_the_rest_nearest():
    # The pools share nothing: each set's tokens come from its own bins nearest the other's.
    target_e, target_m = best_effort_targets(np.array([0.0, 0, 10, 10]), np.array([10.0, 10, 0, 0]), 10)
    assert np.allclose(target_e, [0, 0, 10, 0]) and np.allclose(target_m, [0, 10, 0, 0])
    # They share 6 of the 10: identical there, the other 4 from the nearest surplus of each.
    target_e, target_m = best_effort_targets(np.array([0.0, 3, 3, 50]), np.array([40.0, 3, 3, 0]), 10)
    assert np.allclose(target_e, [0, 3, 3, 4]) and np.allclose(target_m, [4, 3, 3, 0])
    # Enough shared mass: one profile for both, the shared one scaled to the budget.
    target_e, target_m = best_effort_targets(np.array([5.0, 20, 20]), np.array([30.0, 20, 10]), 20)
    assert np.allclose(target_e, target_m) and np.allclose(target_e, [20 * 5 / 35, 20 * 20 / 35, 20 * 10 / 35])


def _first_rows(pool: list[Candidate], budget: int) -> list[int]:
    taken, total = [], 0
    for c in pool:
        if total >= budget:
            break
        taken.append(c.n_tokens)
        total += c.n_tokens
    return taken


def test_best_effort_matching_hits_the_budget_where_the_common_range_cannot():
    rng = random.Random(3)
    # Long behavior-rich traces, short behavior-poor answers: the common range holds too little for the budget.
    enriched = [Candidate(f"e{i}", int(rng.lognormvariate(6.6, 0.8)) + 10, None) for i in range(1200)]
    minimized = [Candidate(f"m{i}", int(rng.lognormvariate(5.0, 0.9)) + 10, None) for i in range(6000)]
    lengths = {c.id: c.n_tokens for c in enriched + minimized}
    held = {"enriched": sum(c.n_tokens for c in enriched), "minimized": sum(c.n_tokens for c in minimized)}
    with pytest.raises(CPTError, match="inside the common length range"):
        match_pools(enriched, minimized, 400_000, length_match="strict", length_trim=0.025)
    for budget in (400_000, 800_000):
        ids_e, ids_m, report = match_pools(enriched, minimized, budget, length_match="best")
        total_e, total_m = sum(lengths[i] for i in ids_e), sum(lengths[i] for i in ids_m)
        assert abs(total_e - budget) <= budget / 100 and abs(total_m - budget) <= budget / 100
        assert not set(ids_e) & set(ids_m) and len(set(ids_m)) == len(ids_m)
        assert (report.enriched_tokens, report.minimized_tokens) == (total_e, total_m)
        unmatched = ks_statistic(_first_rows(enriched, budget), _first_rows(minimized, budget))
        assert report.ks_statistic == pytest.approx(ks_statistic([lengths[i] for i in ids_e], [lengths[i] for i in ids_m]))
        assert report.pool_tokens == held
        assert report.pool_used == pytest.approx({"enriched": total_e / held["enriched"], "minimized": total_m / held["minimized"]})
        assert sum(report.length_histogram["minimized"]) == len(ids_m)
        assert sum(report.length_histogram["enriched_pool"]) == len(enriched)
        if budget == 400_000:  # the pools share enough length mass: one target profile for both
            assert report.shared_tokens >= budget and report.target_ks == 0 and report.ks_statistic < 0.08
            assert report.ks_statistic < unmatched / 3
        else:  # they do not: the rest is placed as close as it goes, and the residual is reported
            assert report.shared_tokens < budget and report.target_ks > 0
            assert report.ks_statistic < unmatched


# --------------------------------------------------------------------------------------------- #
# End to end on the sample corpus
# --------------------------------------------------------------------------------------------- #
def test_cpt_on_sample_corpus(sample_tags, tiny_model, tmp_path):
    out = tmp_path / "cpt"
    result = run_cpt(cpt_job(sample_tags, SAMPLE, "8k", tiny_model, out, seed=1, domain_key="topic", pack_length=128),
                     progress=False)
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
    again = run_cpt(cpt_job(sample_tags, SAMPLE, "8k", tiny_model, tmp_path / "again", seed=1, domain_key="topic",
                            export=False), progress=False)
    assert _ids(again.output / "enriched") == enriched
    other = run_cpt(cpt_job(sample_tags, SAMPLE, "8k", tiny_model, tmp_path / "other", seed=2, export=False),
                    progress=False)
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
        run_cpt(cpt_job(sample_tags, SAMPLE, "5M", tiny_model, tmp_path / "big"), progress=False)
    with pytest.raises(CPTError, match="min-behaviors"):
        CPTSelection(min_behaviors=5)


@pytest.mark.parametrize("fmt", ["parquet", "memmap"])
def test_packing_round_trips_to_the_original_tokens(sample_tags, tiny_model, tmp_path, fmt):
    out = tmp_path / "cpt"
    run_cpt(cpt_job(sample_tags, SAMPLE, "4k", tiny_model, out, export=False), progress=False)
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
    job = cpt_job(sample_tags, SAMPLE, "1500", tiny_model, out, rewrite=True, model=tiny_model, pack_length=64)
    result = run_cpt(job, rewrite=options, progress=False)
    for variant in ("enriched", "minimized"):
        sources = _ids(out / variant)
        kept = pq.read_table(out / f"{variant}_rewrite" / "data").to_pylist()
        rejects = [json.loads(l) for l in (out / f"{variant}_rewrite" / "rejects" / "rewrite.jsonl").read_text().splitlines()]
        assert result.rewrite.kept[variant] == len(kept)
        assert sum(result.rewrite.dropped[variant].values()) == len(rejects)
        surplus_file = out / f"{variant}_rewrite" / "rejects" / "rematch_surplus.jsonl"
        surplus = [json.loads(l) for l in surplus_file.read_text().splitlines()] if surplus_file.exists() else []
        rewritten = [r["id"] for r in kept] + [r["id"] for r in rejects] + [r["id"] for r in surplus]
        # The set and, beyond it, more of the same pool (oversampling before the rewrite), each document once.
        pool = {r["id"] for r in pq.read_table(out / ".curate" / "pool" / "data", columns=["id", "pool"]).to_pylist()
                if r["pool"] == variant}
        assert len(set(rewritten)) == len(rewritten) == result.rewrite.sources[variant]["documents"]
        assert set(sources) <= set(rewritten) <= pool and result.rewrite.sources[variant]["from_set"] == len(sources)
        # Every kept rewrite is counted before the re-match, in the set or in its surplus.
        assert result.rewrite.tokens_before[variant] == sum(r["n_tokens"] for r in kept + surplus)
        assert all(r["reason"].startswith(("parse:", "request:")) for r in rejects)
        assert all(r["raw"] is not None for r in rejects if r["reason"].startswith("parse:"))
        for row in kept:  # whatever a random model produced, a kept row parsed
            assert row["question"] and row["answer"] and row["completion"].startswith("<think>")
        card = (out / f"{variant}_rewrite" / "README.md").read_text()
        assert f"{len(rejects):,} dropped" in card and "rewrite_v1-" in card
        assert "Token budgets before and after the re-match" in card and result.rewrite.rematch_note in card
        assert "--rewrite" in assert_family_card(out / f"{variant}_rewrite" / "README.md", "cpt").text


@pytest.mark.skipif(not HAS_SERVE, reason="transformers[serving] not installed (pip install 'curate[serve]')")
def test_llm_solution_judge_through_transformers_serve_rejects_unreadable_verdicts(sample_tags, tiny_model, tmp_path):
    """The is_solution prompt on a tiny random model: every answer is unreadable, so every pool document is rejected
    as unjudged, with the raw answer, and the build says why it has nothing left."""
    out = tmp_path / "cpt"
    judge = SolutionJudgeOptions(model=tiny_model, backend="transformers", device="cpu", max_doc_tokens=64,
                                 max_answer_tokens=8)
    with pytest.raises(CPTError, match="after --require-solution by is_solution_v1-.*0 kept"):
        run_cpt(cpt_job(sample_tags, SAMPLE, 300, tiny_model, out, oversample=1.0, require_solution=True,
                        solution_judge="llm", model=tiny_model, export=False), solution_judge=judge, progress=False)
    pool = pq.read_table(out / ".curate" / "pool" / "data", columns=["id"]).column("id").to_pylist()
    rejects = [json.loads(line) for line in (out / "rejects" / "require_solution.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in rejects) == sorted(pool)
    assert all(r["reason"].startswith("error: ") and r["contain_problem"] is None for r in rejects)
    assert all(r["raw"] is not None for r in rejects if not r["reason"].startswith("error: request"))


def test_llm_solution_judge_and_rewrite_budgets_through_an_endpoint(sample_tags, tiny_model, tmp_path):
    """--require-solution llm and --rewrite against an OpenAI-compatible endpoint that answers well-formed verdicts
    and rewrites (a scripted stand-in for the model: a random model never writes either): the judge's counts, the
    rejects and the card agree with the verdicts the server gave; both rewritten sets land within 1 % of the budget by
    the named tokenizer although rewrites halve one side and lengthen the other."""
    out, budget = tmp_path / "cpt", 3000
    with ScriptedServer() as server:
        judge = SolutionJudgeOptions(model=tiny_model, backend="endpoint", endpoint_url=server.url,
                                     max_doc_tokens=100_000, max_answer_tokens=32)
        rewrite = RewriteOptions(model=tiny_model, backend="endpoint", endpoint_url=server.url, max_doc_tokens=100_000,
                                 max_new_tokens=4096)
        job = cpt_job(sample_tags, SAMPLE, budget, tiny_model, out, seed=3, rewrite=True, require_solution=True,
                      solution_judge="llm", model=tiny_model, export=False,
                      server=ServerFields(backend="endpoint", endpoint_url=server.url))
        result = run_cpt(job, rewrite=rewrite, solution_judge=judge, progress=False)
        outcomes = dict(server.outcomes)
    pool = pq.read_table(out / ".curate" / "pool" / "data", columns=["id", "pool", "text"]).to_pylist()
    expected = {r["id"]: verdict(r["text"])[0] for r in pool}  # what the server answered, recomputed from the text
    assert sum(outcomes[k] for k in ("kept", "no_solution", "unreadable")) == len(pool)
    rejects = [json.loads(line) for line in (out / "rejects" / "require_solution.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in rejects) == sorted(i for i, o in expected.items() if o != "kept")
    for row in rejects:
        reason = {"no_solution": "no_solution: judged by is_solution_v1-", "unreadable": "error: no JSON object"}
        assert row["reason"].startswith(reason[expected[row["id"]]]) and row["raw"] and row["model"] == tiny_model
    card = (out / "minimized" / "README.md").read_text()
    assert "--solution-judge llm" in card
    for variant in ("enriched", "minimized"):
        rows = [r for r in pool if r["pool"] == variant]
        kept = sum(expected[r["id"]] == "kept" for r in rows)
        counts = {o: sum(expected[r["id"]] == o for r in rows) for o in ("no_solution", "unreadable")}
        assert (f"{variant} {kept:,} kept, " in card and f"{counts['no_solution']:,} no_solution" in card
                and f"{counts['unreadable']:,} error" in card)
        assert all(expected[i] == "kept" for i in _ids(out / variant))
    # Budgets after the rewrite: re-counted by the named tokenizer, within 1 % on both sides, no shared ids.
    tokenizer = load_tokenizer(tiny_model)
    sides = {v: pq.read_table(out / f"{v}_rewrite" / "data", columns=["id", "text"]).to_pylist()
             for v in ("enriched", "minimized")}
    for variant, rows in sides.items():
        counts = [len(ids) for ids in tokenizer([r["text"] for r in rows], add_special_tokens=False)["input_ids"]]
        assert abs(sum(counts) - budget) <= budget / 100, (variant, sum(counts))
        assert len({r["id"] for r in rows}) == len(rows)
        assert {r["id"] for r in rows} <= {r["id"] for r in pool if r["pool"] == variant and expected[r["id"]] == "kept"}
    assert not {r["id"] for r in sides["enriched"]} & {r["id"] for r in sides["minimized"]}
    rewrite_result = result.rewrite
    # Halved rewrites on the enriched side need more of its pool than the set and the first margin: a second round.
    assert rewrite_result.rematched and rewrite_result.rounds >= 2
    assert rewrite_result.sources["enriched"]["documents"] > rewrite_result.sources["enriched"]["from_set"]
    assert rewrite_result.tokens_before["enriched"] >= budget and "re-matched at the budget" in rewrite_result.rematch_note
    rewrite_card = (out / "enriched_rewrite" / "README.md").read_text()
    assert f"Rewritten in {rewrite_result.rounds} round(s)" in rewrite_card
    assert f"{rewrite_result.tokens_before['enriched']:,} | {rewrite_result.tokens['enriched']:,} |" in rewrite_card


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
    result = run_cpt(cpt_job(tags, str(corpus), "40k", tiny_model, tmp_path / "out", min_behaviors=2, tolerance=0.02,
                             export=False, length_match="none"), progress=False)
    enriched, minimized = _ids(tmp_path / "out" / "enriched"), _ids(tmp_path / "out" / "minimized")
    assert not set(enriched) & set(minimized)
    tokens_e, tokens_m = _tokens(tmp_path / "out" / "enriched"), _tokens(tmp_path / "out" / "minimized")
    assert abs(tokens_e - 40_000) <= 800 and abs(tokens_m - 40_000) <= 800
    assert 0 <= result.report.ks_statistic <= 1
    with duckdb.connect() as connection:
        wait = connection.sql(f"SELECT avg(CAST(text LIKE '%Wait%' AS INTEGER)) FROM read_parquet('{tmp_path}/out/enriched/data/*.parquet')").fetchall()[0][0]
    assert wait > 0.2  # backtracking-rich traces dominate the enriched set
    with pytest.raises(CPTError, match="inside the common length range"):
        run_cpt(cpt_job(tags, str(corpus), "40k", tiny_model, tmp_path / "big", min_behaviors=2, tolerance=0.02,
                        export=False, length_match="strict"), progress=False)

    # Long traces vs short answers: the common length range is what brings the two length distributions together.
    reports = {mode: run_cpt(cpt_job(tags, str(corpus), "20k", tiny_model, tmp_path / mode, tolerance=0.02,
                                     export=False, length_match=mode), progress=False).report
               for mode in ("none", "strict")}
    common = reports["strict"]
    assert abs(common.enriched_tokens - 20_000) <= 200 and abs(common.minimized_tokens - 20_000) <= 400
    assert not set(_ids(tmp_path / "strict" / "enriched")) & set(_ids(tmp_path / "strict" / "minimized"))
    assert common.ks_statistic < reports["none"].ks_statistic / 2
    card = (tmp_path / "strict" / "enriched" / "README.md").read_text()
    summary = json.loads((tmp_path / "strict" / ".curate" / "cpt.json").read_text())
    removed = summary["parameters"]["length_removed"]
    assert removed["enriched"] > 0 and removed["minimized"] > 0
    assert f"{removed['enriched']:,} enriched and {removed['minimized']:,} minimized candidates removed" in card


@pytest.fixture(scope="module")
def qwen_tokenizer(tmp_path_factory):
    from tests.support.qwen_vocab import make_qwen_tokenizer

    return str(make_qwen_tokenizer(tmp_path_factory.mktemp("qwen") / "tokenizer"))


def _tag_rows(tags: Path) -> dict[str, dict]:
    """The attribute rows as the tagger wrote them, read with pyarrow (not through the cpt query)."""
    rows = [r for f in sorted(tags.glob("*attributes*.parquet")) for r in pq.read_table(f).to_pylist()]
    by_id = {r["id"]: r for r in rows}
    assert len(by_id) == len(rows)
    return by_id


def test_best_effort_default_on_real_mix_where_the_common_range_fails(shared_data, qwen_tokenizer, tmp_path):
    from scipy.stats import ks_2samp

    from tests.support.qwen_vocab import qwen_reference_counts
    from tests.support.real_mix import write_real_mix

    corpus = tmp_path / "mix.jsonl"
    genres = write_real_mix(shared_data, corpus, max_bytes=250_000)  # ~1.7 MB: traces, SE, GSM8K, MATH, PRM800K, AQuA
    assert len(genres) == 7
    tags = run_tagging(InputSpec(str(corpus)), tmp_path / "tags", "cues", progress=False).tags_dir
    budget = 90_000
    # The length range both pools share holds too few behavior-rich tokens for the budget: strict refuses, and counts
    # the candidates the range left out (cut on characters before the token counts, so not zero).
    with pytest.raises(CPTError, match=r"inside the common length range [\d,]+-[\d,]+ tokens \([1-9][\d,]* candidates"):
        run_cpt(cpt_job(tags, str(corpus), budget, qwen_tokenizer, tmp_path / "strict", export=False,
                        length_match="strict"), progress=False)
    out = tmp_path / "best"
    report = run_cpt(cpt_job(tags, str(corpus), budget, qwen_tokenizer, out, domain_key="domain", export=False),
                     progress=False).report  # the default
    assert report.length_match == "best" and min(report.pool_tokens.values()) > 2 * budget
    sets = {v: pq.read_table(out / v / "data").to_pylist() for v in ("enriched", "minimized")}
    for variant, rows in sets.items():
        # Tokens re-counted by the package's own tiktoken encoder, not the transformers tokenizer the build used.
        counts = qwen_reference_counts([r["text"] for r in rows])
        assert counts == [r["n_tokens"] for r in rows]
        assert abs(sum(counts) - budget) <= budget / 100, variant
        assert len({r["id"] for r in rows}) == len(rows)
    assert not {r["id"] for r in sets["enriched"]} & {r["id"] for r in sets["minimized"]}
    behaviors = ("verification", "backtracking", "subgoal_setting", "backward_chaining")
    tagged = _tag_rows(tags)
    for row in sets["enriched"]:
        tag = tagged[row["id"]]
        assert tag["error"] is None and all(tag[b] is not None for b in behaviors) and any(tag[b] >= 1 for b in behaviors)
    assert all(tagged[r["id"]]["error"] is None and all(tagged[r["id"]][b] == 0 for b in behaviors)
               for r in sets["minimized"])
    lengths = {v: [r["n_tokens"] for r in rows] for v, rows in sets.items()}
    assert report.ks_statistic == pytest.approx(ks_2samp(lengths["enriched"], lengths["minimized"]).statistic)
    # Against the way the reference pipeline drew (first rows of each pool until the budget, no matching).
    pool = pq.read_table(out / ".curate" / "pool" / "data").to_pylist()
    first = {}
    for variant in ("enriched", "minimized"):
        taken, total = [], 0
        for r in sorted((r for r in pool if r["pool"] == variant), key=lambda r: r["id"]):
            if total >= budget:
                break
            taken.append(r["n_tokens"])
            total += r["n_tokens"]
        first[variant] = taken
        held = sum(r["n_tokens"] for r in pool if r["pool"] == variant)
        assert report.pool_tokens[variant] == held
        assert report.pool_used[variant] == pytest.approx(sum(lengths[variant]) / held)
    assert report.ks_statistic < ks_2samp(first["enriched"], first["minimized"]).statistic / 2
    card = (out / "enriched" / "README.md").read_text()
    assert f"enriched {100 * report.pool_used['enriched']:.1f} % of {report.pool_tokens['enriched']:,} tokens" in card
    assert f"| two-sample KS statistic (token lengths, enriched vs minimized) | {report.ks_statistic:.4f} |" in card
    histogram = card.split("## Length histograms, pools and sets")[1].split("\n## ")[0]
    table = [line.split("|")[2:6] for line in histogram.splitlines() if line.startswith("| ") and line[2].isdigit()
             or line.startswith("| >=")]
    assert [sum(int(row[i].strip().replace(",", "")) for row in table) for i in range(4)] == [
        report.pool_documents["enriched"], len(sets["enriched"]), report.pool_documents["minimized"], len(sets["minimized"])]
    # --require-solution on the same tags: documents without a problem and a worked solution are rejected, with reasons.
    solved = tmp_path / "solved"
    run_cpt(cpt_job(tags, str(corpus), 40_000, qwen_tokenizer, solved, export=False, require_solution=True,
                    solution_judge="cues"), progress=False)
    rejects = [json.loads(line) for line in (solved / "rejects" / "require_solution.jsonl").read_text().splitlines()]
    assert rejects and {r["reason"].split(":")[0] for r in rejects} <= {"no_problem", "no_solution"}
    rejected = {r["id"] for r in rejects}
    chosen = {v: _ids(solved / v) for v in ("enriched", "minimized")}
    assert not rejected & (set(chosen["enriched"]) | set(chosen["minimized"]))
    summary = json.loads((solved / ".curate" / "cpt.json").read_text())["parameters"]["solutions"]
    pool_rows = pq.read_table(solved / ".curate" / "pool" / "data", columns=["id", "pool"]).to_pylist()
    for variant in ("enriched", "minimized"):
        n = sum(r["pool"] == variant for r in pool_rows)
        assert summary["kept"].get(variant, 0) + sum(summary["rejected"].get(variant, {}).values()) == n
    # Forum questions (problems without a solution) are a far smaller share of the set than of the pool.
    questions = [r["id"].startswith("se-q/") for r in pool_rows if r["pool"] == "minimized"]
    chosen_questions = [i.startswith("se-q/") for i in chosen["minimized"]]
    assert sum(chosen_questions) / len(chosen_questions) <= 0.5 * sum(questions) / len(questions)
    card = (solved / "minimized" / "README.md").read_text()
    assert "--require-solution" in card and CUE_VERSION in card


def test_solution_cues_on_real_genres(shared_data, tmp_path):
    from curate.classifiers.solution import judge_by_cues
    from tests.support.real_mix import write_real_mix

    corpus = tmp_path / "mix.jsonl"
    write_real_mix(shared_data, corpus, max_bytes=250_000)
    kept: dict[str, list[bool]] = {}
    for line in corpus.read_text().splitlines():
        record = json.loads(line)
        kept.setdefault(record["domain"], []).append(judge_by_cues(record["text"]).kept)
    share = {genre: sum(flags) / len(flags) for genre, flags in kept.items()}
    # Problems with worked solutions (the genre is the label): kept.
    assert min(share[g] for g in ("trace", "gsm8k", "math500", "prm800k")) >= 0.9 and share["aqua"] >= 0.75, share
    # Forum questions (a problem, no solution) and answers (a solution to a problem they rarely restate): mostly not.
    # (Read on 80 Stack Exchange texts, about one in six answers restates its problem and works it out.)
    assert share["se_question"] <= 0.1 and share["stackexchange"] <= 0.15, share


@pytest.mark.parametrize(("output", "expected"), [
    ('{"contain_problem": true, "contain_solution": true}', (True, True, None)),
    ('<think>It asks for x.</think>\nAnswer: {"contain_problem": "yes", "contain_solution": "no"}', (True, False, "no_solution")),
    ('{"contain_problem": false, "contain_solution": true}', (False, True, "no_problem")),
    ('The document has a problem. {"contain_problem": 1}', (None, None, "error")),
    ("", (None, None, "error")),
    ('{"contain_problem": true, "contain_solution": maybe}', (None, None, "error")),
])
def test_llm_solution_answers_are_parsed_or_rejected_with_a_reason(output, expected):
    from curate.classifiers.solution import SolutionPrompt, parse_solution_answer

    judgement = parse_solution_answer(output)
    assert (judgement.contain_problem, judgement.contain_solution) == expected[:2]
    assert (judgement.reason or None) == expected[2] if expected[2] != "error" else judgement.reason.startswith("error:")
    prompt = SolutionPrompt.load()
    messages = prompt.messages("Find x if 2x = 4. x = 2.")
    user = messages[1]["content"]
    assert prompt.version.startswith("is_solution_v1-") and user.index("Find x") < user.index("contain_problem")


def test_rewritten_sets_are_matched_on_tokens_again(tmp_path):
    rng = random.Random(5)
    lengths = {}
    for variant, scale in (("enriched", 0.6), ("minimized", 1.1)):  # rewrites shorten traces, lengthen answers
        ids = [f"{variant[0]}{i}" for i in range(400)]
        (tmp_path / variant / "data").mkdir(parents=True)
        pq.write_table(pa.table({"id": ids}), tmp_path / variant / "data" / "train-00000.parquet")
        kept = [i for i in ids if rng.random() > 0.1]  # some rewrites were dropped
        n = [int(rng.lognormvariate(5.5, 0.6) * scale) + 5 for _ in kept]
        lengths[variant] = dict(zip(kept, n))
        for folder in ("data", "rejects"):
            (tmp_path / f"{variant}_rewrite" / folder).mkdir(parents=True)
        pq.write_table(pa.table({"id": kept, "n_tokens": n, "text": ["x"] * len(kept)}),
                       tmp_path / f"{variant}_rewrite" / "data" / "train-00000.parquet")
    result = RewriteResult()
    rematch_rewrites(tmp_path, result, tolerance=0.01, length_bins=10)
    before = {v: sum(lengths[v].values()) for v in lengths}
    assert result.rematched and result.tokens_before == before
    target = min(before.values())
    after = {}
    for variant, sizes in lengths.items():
        rows = pq.read_table(tmp_path / f"{variant}_rewrite" / "data").to_pylist()
        surplus = [json.loads(l) for l in (tmp_path / f"{variant}_rewrite" / "rejects" / "rematch_surplus.jsonl").read_text().splitlines()]
        assert sorted([r["id"] for r in rows] + [r["id"] for r in surplus]) == sorted(sizes)
        after[variant] = sum(sizes[r["id"]] for r in rows)
        assert abs(after[variant] - target) <= target / 100 and result.kept[variant] == len(rows)
    assert result.tokens == after and abs(after["enriched"] - after["minimized"]) <= target / 200 + 1
    # One side kept nothing: the sets stay as they are, and the card says why.
    empty = tmp_path / "minimized_rewrite" / "data" / "train-00000.parquet"
    pq.write_table(pa.table({"id": pa.array([], pa.string()), "n_tokens": pa.array([], pa.int64()),
                             "text": pa.array([], pa.string())}), empty)
    result = RewriteResult()
    rematch_rewrites(tmp_path, result, tolerance=0.01, length_bins=10)
    assert not result.rematched and "no rewrite was kept" in result.rematch_note
