"""Trainer launch kits: the verl fragment and script point at real files and the registry reward; the TRL scripts
run SFT (priming export) and GRPO (RL export, registry reward) for two steps on CPU with a tiny local model."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from curate.handoff.kits import HandoffError, run_handoff
from curate.rewards import compute_score

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def priming(tmp_path_factory):
    from curate.builders.priming import PrimingConfig, run_priming

    out = tmp_path_factory.mktemp("priming") / "ds"
    run_priming(PrimingConfig(variant="all_strategies", n=6, test_n=2, seed=3), out, progress=False)
    return out


def test_verl_kit_points_at_the_export_and_the_registry_reward(priming, tmp_path):
    out = tmp_path / "kit"
    result = run_handoff(priming, "verl", out, progress=False)
    fragment = yaml.safe_load((out / "verl.yaml").read_text())
    # The keys verl 0.9.1's main_ppo reads (a top-level custom_reward_function is ignored there).
    assert "custom_reward_function" not in fragment
    assert fragment["reward"]["custom_reward_function"] == {"path": "pkg://curate.rewards.verl_reward",
                                                            "name": "compute_score"}
    assert fragment["data"]["prompt_key"] == "prompt" and fragment["data"]["reward_fn_key"] == "data_source"
    # No tokenizer given: the limit bounds every prompt by its bytes, and overlong prompts are dropped, never cut.
    longest = max(sum(len(m["content"].encode()) for m in row["prompt"])
                  for row in pq.read_table(out / "rl" / "data").to_pylist())
    assert fragment["data"]["max_prompt_length"] >= longest and fragment["data"]["filter_overlong_prompts"] is True
    train, val = fragment["data"]["train_files"], fragment["data"]["val_files"]
    assert train and val and train != val and all(Path(f).is_file() for f in train + val)
    assert "curate/countdown: 8 rows" in (out / "verl.yaml").read_text()
    assert dict(result.data_sources) == {"curate/countdown": 8}

    script = (out / "run_verl.sh").read_text()
    assert os.access(out / "run_verl.sh", os.X_OK) and subprocess.run(["bash", "-n", str(out / "run_verl.sh")]).returncode == 0
    assert "reward.custom_reward_function.path=pkg://curate.rewards.verl_reward" in script
    assert f"data.train_files=[{train[0]}]" in script

    # The export carries the structured Countdown ground truth, and the reward verl will call accepts the
    # priming completions that the builder checked as correct.
    rows = datasets.load_dataset("parquet", data_files=train, split="train", cache_dir=str(tmp_path / "hf"))
    source = {r["id"]: r for r in pq.read_table(priming / "data").to_pylist()}
    for row in rows:
        original = source[row["extra_info"]["id"]]
        assert row["reward_model"]["ground_truth"] == original["reward_model"]["ground_truth"]
        score = compute_score(row["data_source"], original["completion"], row["reward_model"]["ground_truth"], row["extra_info"])
        assert score == float(original["answer_correct"])


@pytest.fixture(scope="module")
def multihop(tmp_path_factory):
    from curate.builders.jobs import MultihopJob
    from curate.builders.multihop import run_multihop
    from curate.pipelines.cleaning import Cleaning
    from tests.support.shared import NATALIA_A, NATALIA_Q

    root = tmp_path_factory.mktemp("multihop")
    (root / "problems.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "nat", "question": NATALIA_Q, "answer": NATALIA_A},
        {"id": "bags", "question": "Sam has 4 bags of 7 apples. How many apples?", "answer": "<<4*7=28>>28\n#### 28"},
    ]))
    run_multihop(MultihopJob(input=str(root / "problems.jsonl"), output=root / "ds", n=3, hops="2-2", seed=1,
                             cleaning=Cleaning()), progress=False)
    return root / "ds"


def test_readme_handoff_lines_work_as_written_on_a_multihop_dataset(multihop, tmp_path, monkeypatch):
    """README's hand-off lines (export, then handoff of the dataset), run by the CLI in a folder laid out as README
    has it: a multi-hop set, with its full/half/single splits and no train split, gets one verl kit per split."""
    import shutil

    from typer.testing import CliRunner

    from curate.cli import app

    monkeypatch.chdir(tmp_path)
    shutil.copytree(multihop, tmp_path / "datasets" / "multihop")
    readme = (ROOT / "README.md").read_text()
    lines = [line.split("#")[0].split() for line in readme.splitlines()
             if line.startswith(("curate export datasets/multihop ", "curate handoff "))]
    assert [words[1] for words in lines] == ["export", "handoff"]
    for words in lines:
        done = CliRunner().invoke(app, words[1:])
        assert done.exit_code == 0, (words, done.output)
    kit = tmp_path / "kits" / "multihop"
    assert sorted(p.name for p in kit.glob("run_verl*.sh")) == [f"run_verl_{s}.sh" for s in ("full", "half", "single")]
    for split in ("full", "half", "single"):
        fragment = yaml.safe_load((kit / f"verl_{split}.yaml").read_text())
        assert [Path(f).name for f in fragment["data"]["train_files"]] == [f"{split}-00000.parquet"]

    # The export itself is not a dataset to hand off: the error names the dataset to use instead.
    refused = CliRunner().invoke(app, ["handoff", "exports/multihop-verl", "--trainer", "verl", "-o", "kits/x"])
    assert refused.exit_code == 2
    assert f"curate handoff {(tmp_path / 'datasets' / 'multihop').resolve()} --trainer verl" in refused.output


def test_a_dataset_without_rl_or_sft_columns_is_a_clear_error(tmp_path):
    ds = tmp_path / "ds"
    (ds / "data").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{"id": "a", "text": "just text"}]), ds / "data" / "train-00000.parquet")
    with pytest.raises(HandoffError, match="nothing to hand off") as refused:
        run_handoff(ds, "trl", tmp_path / "kit", progress=False)
    assert "sft needs columns the dataset lacks: `question`; a completion (`completion` / " in str(refused.value)
    with pytest.raises(HandoffError, match="unknown trainer"):
        run_handoff(ds, "deepspeed", tmp_path / "kit", progress=False)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("trl") is None, reason="trl not installed (pip install 'curate[test]')")
def test_trl_kit_trains_sft_and_grpo_for_two_steps_on_cpu(priming, tmp_path):
    from tests.support.tiny_model import make_tiny_chat_model

    model = make_tiny_chat_model(tmp_path / "model")
    out = tmp_path / "kit"
    result = run_handoff(priming, "trl", out, progress=False)
    assert set(result.exports) == {"rl", "sft"} and (out / "train_sft.py").exists() and (out / "train_grpo.py").exists()
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                   "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "2"}
    common = ["--model", str(model), "--max-steps", "2", "--batch-size", "2", "--cpu"]
    runs = {
        "sft": [sys.executable, str(out / "train_sft.py"), *common, "--max-length", "256", "--output-dir", str(tmp_path / "sft")],
        "grpo": [sys.executable, str(out / "train_grpo.py"), *common, "--num-generations", "2",
                 "--max-completion-length", "8", "--output-dir", str(tmp_path / "grpo")],
    }
    for name, command in runs.items():
        done = subprocess.run(command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, f"{name}:\n{done.stderr[-3000:]}"
        assert "'epoch'" in done.stdout + done.stderr  # the trainer logged its steps
        assert (tmp_path / name / "config.json").exists() and list((tmp_path / name).glob("*.safetensors"))
    # GRPO logged the registry reward by the name trl_reward gives it.
    assert "rewards/curate_reward/mean" in done.stdout + done.stderr
