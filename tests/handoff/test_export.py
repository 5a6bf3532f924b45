import json

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curate.handoff.export import ExportError, run_export
from curate.rewards import compute_score, trl_reward

ROWS = [
    {"id": "m1", "question": "What is 1/2 + 1/4?", "answer": "\\frac{3}{4}", "data_source": "curate/math",
     "ability": "math", "completion": "1/2 = 2/4, so the sum is \\boxed{\\frac{3}{4}}.", "level": 2},
    {"id": "m2", "question": "Solve x^2 = 64.", "answer": "\\pm 8", "data_source": "curate/math",
     "ability": "math", "completion": "x = \\boxed{\\pm 8}", "level": 3},
    {"id": "bad1", "question": "Write a poem.", "answer": "roses", "data_source": "curate/poetry",
     "ability": "art", "completion": "…", "level": 1},
    {"id": "bad2", "question": "  ", "answer": "1", "data_source": "curate/math", "ability": "math",
     "completion": "\\boxed{1}", "level": 1},
]


@pytest.fixture
def dataset(tmp_path):
    root = tmp_path / "ds"
    (root / "data").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(ROWS), root / "data" / "train-00000.parquet")
    pq.write_table(pa.Table.from_pylist(ROWS[:1]), root / "data" / "test-00000.parquet")
    return root


def load(output):
    return datasets.load_dataset("parquet", data_dir=str(output / "data"), cache_dir=str(output.parent / "hf-cache"))


def rejects(output):
    return [json.loads(x) for x in (output / "rejects" / "export.jsonl").read_text().splitlines()]


def test_verl_export_matches_verl_schema_and_scores(dataset, tmp_path):
    out = tmp_path / "verl"
    result = run_export(dataset, "verl", out, progress=False)
    assert dict(result.rows) == {"test": 1, "train": 2}
    loaded = load(out)
    train = loaded["train"]
    assert set(train.column_names) == {"data_source", "prompt", "ability", "reward_model", "extra_info"}
    row = train[0]
    assert row["prompt"][0]["role"] == "user" and row["prompt"][0]["content"].endswith("\\boxed{}.")
    assert row["reward_model"] == {"style": "rule", "ground_truth": "\\frac{3}{4}"}
    assert row["extra_info"]["split"] == "train" and row["extra_info"]["index"] == 0
    assert row["extra_info"]["id"] == "m1" and row["extra_info"]["level"] == 2
    assert compute_score(row["data_source"], ROWS[0]["completion"], row["reward_model"]["ground_truth"], row["extra_info"]) == 1.0
    reasons = sorted(r["reason"].split(" (")[0] for r in rejects(out))
    assert reasons == ["empty question", "unknown data_source 'curate/poetry'"]
    assert not list((out / "data").glob("*.partial")) and (out / "README.md").exists()


def test_trl_export_feeds_the_registry_reward(dataset, tmp_path):
    out = tmp_path / "trl"
    run_export(dataset, "trl", out, system="You are careful.", instruction="", progress=False)
    train = load(out)["train"]
    assert set(train.column_names) == {"prompt", "solution", "data_source", "id", "level"}  # level: a scalar column kept
    assert [m["role"] for m in train[0]["prompt"]] == ["system", "user"]
    assert train[0]["prompt"][1]["content"] == ROWS[0]["question"]
    completions = [[{"role": "assistant", "content": r["completion"]}] for r in ROWS[:2]]
    assert trl_reward()(prompts=train["prompt"], completions=completions, solution=train["solution"],
                        data_source=train["data_source"]) == [1.0, 1.0]


def test_openrlhf_sft_and_cpt_exports(dataset, tmp_path):
    run_export(dataset, "openrlhf", tmp_path / "o", progress=False)
    o = load(tmp_path / "o")["train"]
    assert set(o.column_names) == {"input", "label", "data_source", "id"} and isinstance(o[0]["input"], str)
    assert o[1]["label"] == "\\pm 8"

    run_export(dataset, "sft", tmp_path / "s", progress=False)
    s = load(tmp_path / "s")["train"]
    assert set(s.column_names) == {"query", "completion", "id"} and len(s) == 3  # no data_source needed for SFT
    assert s[0]["completion"] == ROWS[0]["completion"]

    run_export(dataset, "cpt", tmp_path / "c", progress=False)
    c = load(tmp_path / "c")["train"]
    assert c.column_names == ["text", "id"] and c[0]["text"].startswith(ROWS[0]["question"])


def test_structured_ground_truth_survives_verl_export(tmp_path):
    root = tmp_path / "cd"
    (root / "data").mkdir(parents=True)
    rows = [{"id": "c1", "question": "Use 3, 5, 2 to make 16.", "answer": "(3 + 5) * 2",
             "ground_truth": {"numbers": [3, 5, 2], "target": 16}, "data_source": "curate/countdown",
             "ability": "countdown"}]
    pq.write_table(pa.Table.from_pylist(rows), root / "data" / "train-00000.parquet")
    run_export(root, "verl", tmp_path / "v", progress=False)
    row = load(tmp_path / "v")["train"][0]
    assert row["reward_model"]["ground_truth"] == {"numbers": [3, 5, 2], "target": 16}
    assert compute_score(row["data_source"], "<answer>(3 + 5) * 2</answer>", row["reward_model"]["ground_truth"]) == 1.0
    run_export(root, "openrlhf", tmp_path / "o", progress=False)
    label = load(tmp_path / "o")["train"][0]["label"]
    assert json.loads(label) == {"numbers": [3, 5, 2], "target": 16}
    assert compute_score("curate/countdown", "<answer>(3 + 5) * 2</answer>", label) == 1.0


def test_missing_columns_are_a_clear_error(tmp_path):
    path = tmp_path / "only_text.parquet"
    pq.write_table(pa.Table.from_pylist([{"id": "1", "text": "hello"}]), path)
    with pytest.raises(ExportError, match="question"):
        run_export(path, "verl", tmp_path / "x", progress=False)
    with pytest.raises(ExportError, match="unknown target"):
        run_export(path, "megatron", tmp_path / "y", progress=False)
    run_export(path, "cpt", tmp_path / "z", progress=False)
    assert load(tmp_path / "z")["train"][0]["text"] == "hello"


def test_priming_prompt_is_exported_as_built_and_the_instruction_is_never_repeated(tmp_path):
    from curate.builders.priming import PrimingConfig, run_priming

    built = tmp_path / "priming"
    run_priming(PrimingConfig(variant="only_backtracking", n=3, test_n=1, seed=4, format_score=0.1), built, progress=False)
    source = {r["id"]: r for r in pq.read_table(built / "data").to_pylist()}
    instruction = "Show your work, then give the final equation"  # the Countdown reward's own instruction
    run_export(built, "sft", tmp_path / "sft", progress=False)
    for row in pq.read_table(tmp_path / "sft" / "data").to_pylist():
        assert row["query"] == source[row["id"]]["query"] and instruction not in row["query"]
    run_export(built, "verl", tmp_path / "verl", progress=False)
    for row in pq.read_table(tmp_path / "verl" / "data").to_pylist():
        original = source[row["extra_info"]["id"]]
        assert row["prompt"] == original["prompt"]  # SFT and RL see the same prompt, the builder's
        assert row["extra_info"]["format_score"] == 0.1 and "query" not in row["extra_info"]
        truth = row["reward_model"]["ground_truth"]
        wrong = " + ".join(map(str, truth["numbers"]))
        expected = 1.0 if sum(truth["numbers"]) == truth["target"] else 0.1
        assert compute_score(row["data_source"], f"<answer> {wrong} </answer>", truth, row["extra_info"]) == expected
    # TRL: the format score travels as a column, which GRPOTrainer passes to the reward as a keyword.
    run_export(built, "trl", tmp_path / "trl", progress=False)
    trl_rows = pq.read_table(tmp_path / "trl" / "data").to_pylist()
    assert trl_rows and all(row["format_score"] == 0.1 for row in trl_rows)
    columns = {key: [row[key] for row in trl_rows] for key in trl_rows[0]}
    wrongs = [" + ".join(map(str, row["solution"]["numbers"])) for row in trl_rows]
    completions = [[{"role": "assistant", "content": f"<answer> {w} </answer>"}] for w in wrongs]
    scores = trl_reward()(completions=completions, **columns)
    assert scores == [1.0 if sum(r["solution"]["numbers"]) == r["solution"]["target"] else 0.1 for r in trl_rows]


def test_a_question_that_already_asks_for_the_format_gets_no_second_instruction(tmp_path):
    rows = [{"id": "a", "question": "What is 2 + 2? Put your final answer within \\boxed{}.", "answer": "4",
             "data_source": "curate/math", "completion": "\\boxed{4}"},
            {"id": "b", "question": "What is 3 + 3? Give it as \\boxed{n}.", "answer": "6",
             "data_source": "curate/math", "completion": "\\boxed{6}"},
            {"id": "c", "question": "What is 4 + 4?", "answer": "8", "data_source": "curate/math", "completion": "\\boxed{8}"}]
    path = tmp_path / "q.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    for target in ("sft", "verl"):
        run_export(path, target, tmp_path / target, progress=False)
        out = pq.read_table(tmp_path / target / "data").to_pylist()
        prompts = [r["query"] if target == "sft" else r["prompt"][-1]["content"] for r in out]
        assert prompts[0] == rows[0]["question"] and prompts[1] == rows[1]["question"]
        assert prompts[2] == rows[2]["question"] + "\n\nPut your final answer within \\boxed{}."
    # An explicit instruction is appended unless the prompt already holds it.
    run_export(path, "sft", tmp_path / "explicit", instruction="Think step by step.", progress=False)
    assert [r["query"].count("Think step by step.") for r in pq.read_table(tmp_path / "explicit" / "data").to_pylist()] == [1, 1, 1]
