"""Trainer launch kits: the verl fragment and script point at real files and the registry reward; the TRL scripts
run SFT (priming export) and GRPO (RL export, registry reward) for two steps on CPU with a tiny local model."""

from __future__ import annotations

import importlib.util
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
from curate.rewards import REWARD_PATH, compute_score

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
    assert fragment["custom_reward_function"] == {"path": str(REWARD_PATH.resolve()), "name": "compute_score"}
    assert fragment["data"]["prompt_key"] == "prompt" and fragment["data"]["reward_fn_key"] == "data_source"
    train, val = fragment["data"]["train_files"], fragment["data"]["val_files"]
    assert train and val and train != val and all(Path(f).is_file() for f in train + val)
    assert "curate/countdown: 8 rows" in (out / "verl.yaml").read_text()
    assert dict(result.data_sources) == {"curate/countdown": 8}

    script = (out / "run_verl.sh").read_text()
    assert os.access(out / "run_verl.sh", os.X_OK) and subprocess.run(["bash", "-n", str(out / "run_verl.sh")]).returncode == 0
    assert f"custom_reward_function.path={REWARD_PATH.resolve()}" in script and f"data.train_files=[{train[0]}]" in script

    # The export carries the structured Countdown ground truth, and the reward verl will call accepts the
    # priming completions that the builder checked as correct.
    rows = datasets.load_dataset("parquet", data_files=train, split="train", cache_dir=str(tmp_path / "hf"))
    source = {r["id"]: r for r in pq.read_table(priming / "data").to_pylist()}
    for row in rows:
        original = source[row["extra_info"]["id"]]
        assert row["reward_model"]["ground_truth"] == original["reward_model"]["ground_truth"]
        score = compute_score(row["data_source"], original["completion"], row["reward_model"]["ground_truth"], row["extra_info"])
        assert score == float(original["answer_correct"])


def test_a_dataset_without_rl_or_sft_columns_is_a_clear_error(tmp_path):
    ds = tmp_path / "ds"
    (ds / "data").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{"id": "a", "text": "just text"}]), ds / "data" / "train-00000.parquet")
    with pytest.raises(HandoffError, match="nothing to hand off"):
        run_handoff(ds, "trl", tmp_path / "kit", progress=False)
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
