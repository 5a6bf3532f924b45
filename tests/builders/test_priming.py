import json
import random
import re

import pyarrow.parquet as pq
import pytest

from curate.behaviors import BEHAVIOR_NAMES
from curate.builders.jobs import PRIMING_CHECK
from curate.builders.priming import (
    PrimingConfig,
    PrimingError,
    count_tokens,
    draft_trace,
    placeholder_text,
    run_priming,
)
from curate.builders.trace_phrases import VARIANTS
from curate.builders.trace_templates import TraceError, teacher_messages, write_trace
from curate.classifiers import get_classifier
from curate.classifiers.base import Classifier, register
from curate.hf_tokenizers import load_tokenizer
from curate.puzzles.countdown import check_expression, generate_problem, score_countdown
from curate.schema import Labels

THINK = re.compile(r"^<think>\n(.*)\n</think>\n<answer> (.*) </answer>$", re.DOTALL)


class EverythingClassifier(Classifier):
    """Says every text shows all four behaviors: only all_strategies can pass the check."""

    name = "everything_v1"

    def classify(self, texts):
        return [Labels(counts={b: 1 for b in BEHAVIOR_NAMES}) for _ in texts]


@pytest.fixture
def everything_classifier():
    from curate.classifiers import base

    register("everything_v1")(EverythingClassifier)
    yield "everything"
    base._REGISTRY.pop("everything_v1")  # other tests list the registry


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    rng = random.Random(0)
    corpus = []
    while len(corpus) < 60:
        try:
            corpus.append(write_trace(generate_problem(rng), VARIANTS["all_strategies"], rng).text)
        except TraceError:
            continue
    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=400, special_tokens=["[UNK]"],
                                                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    path = tmp_path_factory.mktemp("tokenizer")
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]").save_pretrained(path)
    return str(path)


def _rows(output):
    rows = []
    for split in ("train", "test"):
        path = output / "data" / f"{split}-00000.parquet"
        if path.exists():
            rows += pq.read_table(path).to_pylist()
    return rows


@pytest.mark.parametrize("variant, answers", [
    ("all_strategies", "correct"), ("only_backtracking", "incorrect"), ("backtracking_verification", "correct"),
    ("backtracking_subgoal", "incorrect"), ("backtracking_backward", "correct"), ("negative_control", "incorrect"),
])
def test_variant_shows_exactly_the_requested_behaviors(tmp_path, variant, answers):
    result = run_priming(PrimingConfig(variant=variant, answers=answers, n=16, test_n=4, seed=3), tmp_path,
                         progress=False)
    rows = _rows(tmp_path)
    assert result.rows == {"train": 16, "test": 4} and len(rows) == 20
    thinks = [THINK.match(r["completion"]).group(1) for r in rows]
    # Classify again, independently of the counts the builder stored.
    labels = get_classifier(PRIMING_CHECK).classify(thinks)  # the check priming runs by default
    wanted = {b.value for b in VARIANTS[variant]}
    for row, label in zip(rows, labels):
        for behavior in BEHAVIOR_NAMES:
            assert bool(label.counts[behavior]) == (behavior in wanted), (behavior, row["completion"])
            assert row[behavior] == label.counts[behavior]
        truth = row["reward_model"]["ground_truth"]
        expected = 1.0 if answers == "correct" else 0.0
        assert score_countdown(row["completion"], truth) == expected
        assert row["answer_correct"] is (answers == "correct")
        # An incorrect answer is a well-formed expression over the given numbers, unless the failure is a number
        # used twice or left out.
        status = check_expression(row["completion_answer"], truth["numbers"], truth["target"]).status
        if answers == "correct":
            assert status == "correct" and row["failure"] is None
        else:
            assert status == ("invalid" if row["failure"] in ("number_used_twice", "number_left_out") else "wrong")
        assert check_expression(row["answer"], truth["numbers"], truth["target"]).status == "correct"
    train_ids = {r["id"] for r in rows if r["extra_info"]["split"] == "train"}
    test_ids = {r["id"] for r in rows if r["extra_info"]["split"] == "test"}
    assert len(train_ids) == 16 and len(test_ids) == 4 and not train_ids & test_ids
    assert result.stats["problems_in_both_splits"] == 0
    assert result.acceptance_rate > 0.15  # measured under the independent cues classifier; the card reports it
    card = (tmp_path / "README.md").read_text()
    assert variant in card and "acceptance rate" in card and "under `cues" in card
    assert "Prose diversity" in card and 0 < result.stats["distinct_4gram_rate"]["all"] < 1
    assert sum(result.stats["failures"].values()) == 20


def test_rows_follow_verl_and_sft_formats(tmp_path):
    run_priming(PrimingConfig(variant="only_backtracking", n=5, test_n=2, seed=1), tmp_path, progress=False)
    from datasets import load_dataset

    dataset = load_dataset("parquet", data_dir=str(tmp_path / "data"))
    assert set(dataset) == {"train", "test"}
    row = dataset["train"][0]
    assert row["data_source"] == "curate/countdown"
    # One prompt for SFT and RL: the TinyZero completion prompt is the query and the one user message.
    assert row["prompt"] == [{"role": "user", "content": row["query"]}]
    assert row["query"].count(row["question"]) == 1 and row["query"].count("<answer>") == 2  # asked once, with its example
    assert row["format_score"] == 0.0 and row["extra_info"]["format_score"] == 0.0
    assert row["reward_model"]["style"] == "rule"
    assert set(row["reward_model"]["ground_truth"]) == {"target", "numbers"}
    assert row["extra_info"]["split"] == "train" and row["extra_info"]["index"] == 0
    assert row["query"].endswith("Assistant: Let me solve this step by step.\n")
    assert str(row["numbers"]) in row["query"] and str(row["target"]) in row["query"]
    assert THINK.match(row["completion"])
    assert [r["extra_info"]["index"] for r in dataset["train"]] == list(range(5))


def test_empty_cot(tmp_path):
    run_priming(PrimingConfig(variant="empty_cot", answers="incorrect", n=6, test_n=2), tmp_path, progress=False)
    for row in _rows(tmp_path):
        assert row["completion"].startswith("<think>\n \n</think>\n<answer> ")
        assert score_countdown(row["completion"], row["reward_model"]["ground_truth"]) == 0.0
        assert row["answer_correct"] is False


def test_placeholder_matches_the_token_count_of_the_paired_trace(tmp_path, tokenizer_dir):
    tokenizer = load_tokenizer(tokenizer_dir)
    for n in (1, 2, 7, 50, 333):
        assert count_tokens(tokenizer, placeholder_text(tokenizer, n)) == n
    config = PrimingConfig(variant="placeholder_cot", tokenizer=tokenizer_dir, n=6, test_n=2)
    rng = random.Random(0)
    drafted = 0
    for _ in range(10):
        problem = generate_problem(rng)
        try:
            filler, answer, _ = draft_trace(problem, config, tokenizer, random.Random(11))
        except TraceError:  # no backward chain reaches the target: the builder draws another problem
            continue
        drafted += 1
        paired = write_trace(problem, VARIANTS["all_strategies"], random.Random(random.Random(11).random()))
        assert count_tokens(tokenizer, filler) == count_tokens(tokenizer, paired.text) > 20
        assert answer == paired.answer
        assert not re.search(r"\d", filler)
    assert drafted >= 6
    result = run_priming(config, tmp_path, progress=False)
    rows = _rows(tmp_path)
    assert result.rows == {"train": 6, "test": 2}
    for row in rows:
        filler = THINK.match(row["completion"]).group(1)
        assert row["think_tokens"] == count_tokens(tokenizer, filler) > 20
        assert all(row[b] == 0 for b in BEHAVIOR_NAMES)


def test_behavior_check_rejects_and_keeps_reasons(tmp_path, everything_classifier):
    config = PrimingConfig(variant="only_backtracking", classifier=everything_classifier, n=4, test_n=1, max_attempts_factor=2,
                           batch_size=4)
    with pytest.raises(PrimingError, match="gave up"):
        run_priming(config, tmp_path, progress=False)
    rejects = [json.loads(line) for line in (tmp_path / "rejects" / "rejects.jsonl").read_text().splitlines()]
    assert rejects and all(r["reason"].startswith("behavior check: unwanted") for r in rejects)
    assert all(r["think"] for r in rejects)
    assert not list((tmp_path / "data").glob("*.parquet*"))  # nothing half-written is left
    accepted = run_priming(PrimingConfig(variant="all_strategies", classifier=everything_classifier, n=3, test_n=1),
                           tmp_path / "ok", progress=False)
    assert accepted.acceptance_rate == 1.0


def test_phrasing_varies_with_the_seed():
    problem = generate_problem(random.Random(4))
    texts = {write_trace(problem, VARIANTS["all_strategies"], random.Random(seed)).text for seed in range(12)}
    openings = {text.splitlines()[0] for text in texts}
    assert len(texts) == 12 and len(openings) >= 3


def test_config_errors_are_clear():
    for config, message in [
        (PrimingConfig(variant="nope"), "unknown variant"),
        (PrimingConfig(variant="empty_cot", answers="maybe"), "--answers"),
        (PrimingConfig(variant="placeholder_cot"), "tokenizer"),
        (PrimingConfig(variant="all_strategies", writer="llm"), "LLM"),
    ]:
        with pytest.raises(PrimingError, match=message):
            config.validate()


def test_teacher_prompt_asks_for_some_behaviors_and_forbids_the_others():
    problem = generate_problem(random.Random(0))
    messages = teacher_messages(problem, VARIANTS["backtracking_verification"])
    system, user = messages[0], messages[-1]
    assert "backtracking:" in system["content"] and "verification:" in system["content"]
    assert "plan" in system["content"] and "work back from the target" in system["content"]
    assert "Omit every evaluation" not in system["content"]
    assert str(problem.target) in user["content"]
    # Few-shot examples: solved problems in the same format, with the same behaviors.
    shots = messages[1:-1]
    assert shots and [m["role"] for m in shots[:2]] == ["user", "assistant"]
    assert all("<think>" in m["content"] and "<answer>" in m["content"] for m in shots if m["role"] == "assistant")
    bare = teacher_messages(problem, VARIANTS["negative_control"])[0]["content"]
    assert "Omit every evaluation" in bare and "Show these behaviors" not in bare
    # No instruction contradicts another: nothing asks to say when a path fails while forbidding backtracking.
    assert "path fails" not in bare


def test_strategy_and_voice_choices_vary():
    rng = random.Random(6)
    problem = generate_problem(rng)
    traces = [write_trace(problem, VARIANTS["only_backtracking"], random.Random(seed)) for seed in range(30)]
    assert {t.strategy for t in traces} == {"dfs", "best_first"}
    assert {t.voice for t in traces} == {"terse", "explanatory", "conversational"}
    backward = write_trace(problem, VARIANTS["backtracking_backward"], random.Random(0))
    assert backward.strategy == "backward"


def test_tinyzero_preset_mixes_sizes_and_rows_carry_the_format_score(tmp_path):
    from curate.builders.priming import apply_preset
    from curate.rewards import compute_score

    space = apply_preset("tinyzero", {})
    assert space == {"n_numbers": (3, 4), "number_range": (1, 100), "target_range": (10, 100)}
    result = run_priming(PrimingConfig(variant="only_backtracking", answers="any", n=24, test_n=4, seed=2,
                                       format_score=0.1, **space), tmp_path, progress=False)
    rows = _rows(tmp_path)
    assert result.rows == {"train": 24, "test": 4}
    assert {len(r["numbers"]) for r in rows} == {3, 4}
    assert all(1 <= n <= 100 for r in rows for n in r["numbers"]) and all(10 <= r["target"] <= 100 for r in rows)
    for row in rows:
        assert row["format_score"] == row["extra_info"]["format_score"] == 0.1
        truth = row["reward_model"]["ground_truth"]
        numbers = truth["numbers"]
        # A well-formed equation over the numbers with another value earns the row's format score, through verl's entry.
        wrong = " + ".join(map(str, numbers))
        expected = 1.0 if sum(numbers) == truth["target"] else 0.1
        assert compute_score(row["data_source"], f"<answer> {wrong} </answer>", truth, row["extra_info"]) == expected
        assert compute_score(row["data_source"], "no answer", truth, row["extra_info"]) == 0.0
    card = (tmp_path / "README.md").read_text()
    assert "--numbers 3,4" in card and "--format-score 0.1" in card and "3 or 4 numbers in 1-100" in card
    # A preset is overridden by what is given explicitly.
    assert apply_preset("tinyzero", {"n_numbers": 3})["n_numbers"] == 3
    with pytest.raises(PrimingError, match="unknown preset"):
        apply_preset("deepseek", {})


@pytest.mark.parametrize("change, message", [
    ({"n_numbers": (3, 7)}, "--numbers"), ({"n_numbers": ()}, "--numbers"), ({"format_score": 1.0}, "--format-score"),
    ({"format_score": -0.1}, "--format-score"), ({"number_range": (0, 9)}, "--number-range"),
    ({"target_range": (50, 10)}, "--target-range"),
])
def test_bad_problem_space_or_format_score_is_refused(change, message):
    with pytest.raises(PrimingError, match=message):
        PrimingConfig(variant="only_backtracking", **change).validate()


def test_cli_priming_preset_options_and_format_score(tmp_path):
    from typer.testing import CliRunner

    from curate.cli import app

    out = tmp_path / "tz"
    result = CliRunner().invoke(app, ["priming", "--variant", "negative_control", "--answers", "any", "--preset", "tinyzero",
                                      "--numbers", "3", "--format-score", "0.1", "--n", "6", "--test-n", "2", "-o", str(out)])
    assert result.exit_code == 0, result.output
    rows = _rows(out)
    assert len(rows) == 8 and {len(r["numbers"]) for r in rows} == {3}  # --numbers wins over the preset's 3,4
    assert all(1 <= n <= 100 for r in rows for n in r["numbers"]) and {r["format_score"] for r in rows} == {0.1}
    parameters = json.loads((out / ".curate" / "parameters.json").read_text())
    assert parameters["number_range"] == [1, 100] and parameters["answers"] == "any"
    bad = CliRunner().invoke(app, ["priming", "--variant", "negative_control", "--numbers", "3,x", "-o", str(tmp_path / "b")])
    assert bad.exit_code != 0 and "--numbers" in bad.output
