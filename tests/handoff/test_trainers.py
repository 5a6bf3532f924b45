"""curate's launch kits, run in the trainers' own code on CPU: verl 0.9.1 and TRL 1.16 (the `trainers` test extra).

For a priming, a multi-hop and an MCQA->open dataset, each kit curate writes is taken as a user takes it:
- verl: the overrides in the kit's run_verl script compose verl's own `ppo_trainer` config (hydra, as main_ppo does);
  verl's RLHFDataset loads the kit's files under that config, its own prompt-length filter keeping every row (and
  dropping one at a limit one token lower: the kit's count is exact); right and wrong responses are scored through
  verl's reward loop (RewardLoopWorker -> NaiveRewardManager -> the kit's custom reward function).
- TRL: the kit's train_grpo.py builds its GRPOTrainer and trains two steps whose completions are scripted (a rollout
  function answers every prompt rightly in step 1 and wrongly in step 2); the rewards are read from TRL's own log.
Right answers come from the built datasets' own columns (`answer`, priming's checked `completion`, `numbers` and
`target`), not from the export or the reward under test. Right must score 1, wrong at most 0.1 (the Countdown format
score of a well-formed wrong equation).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import shlex
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytest.importorskip("verl", reason="verl not installed: see README, 'the trainers test extra'")
pytest.importorskip("trl", reason="trl not installed: pip install -e '.[trainers]'")

from curate.handoff.kits import run_handoff  # noqa: E402
from tests.support.shared import NATALIA_A, NATALIA_Q  # noqa: E402

pytestmark = pytest.mark.slow


@dataclass
class Built:
    dataset: Path
    right: dict[str, str]  # row id -> a response the reward must score 1
    wrong: dict[str, str]  # row id -> a response it must score at most 0.1


def _rows(dataset: Path) -> list[dict]:
    return [row for path in sorted((dataset / "data").glob("*.parquet")) for row in pq.read_table(path).to_pylist()]


def _boxed(answers: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    right = {i: f"Working it through, the result is \\boxed{{{a}}}." for i, a in answers.items()}
    wrong = {i: f"Working it through, the result is \\boxed{{{a}7}}." for i, a in answers.items()}
    return right, wrong


def _jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def build_priming(root: Path) -> Built:
    from curate.builders.priming import PrimingConfig, run_priming

    dataset = root / "priming"
    run_priming(PrimingConfig(variant="all_strategies", n=4, test_n=2, seed=3, format_score=0.1), dataset,
                progress=False)
    rows = [row for row in _rows(dataset) if row["answer_correct"]]
    # A well-formed equation that is wrong: one given number alone, not the target.
    wrong = {row["id"]: f"<answer> {next(n for n in row['numbers'] if n != row['target'])} </answer>" for row in rows}
    return Built(dataset, {row["id"]: row["completion"] for row in rows}, wrong)


def build_multihop(root: Path) -> Built:
    from curate.builders.jobs import MultihopJob
    from curate.builders.multihop import run_multihop
    from curate.pipelines.cleaning import Cleaning

    source = _jsonl(root / "problems.jsonl", [
        {"id": "nat", "question": NATALIA_Q, "answer": NATALIA_A},
        {"id": "bags", "question": "Sam has 4 bags of 7 apples. How many apples?", "answer": "<<4*7=28>>28\n#### 28"},
        {"id": "cook", "question": "Bake 36 cookies and eat 8. How many are left?", "answer": "<<36-8=28>>28\n#### 28"},
    ])
    dataset = root / "multihop"
    run_multihop(MultihopJob(input=str(source), output=dataset, n=4, hops="2-2", seed=1, cleaning=Cleaning()),
                 progress=False)
    return Built(dataset, *_boxed({row["id"]: row["answer"] for row in _rows(dataset)}))


def build_mcqa(root: Path) -> Built:
    from curate.builders.jobs import McqaJob
    from curate.builders.mcqa import run_mcqa
    from curate.pipelines.cleaning import Cleaning

    source = _jsonl(root / "mc.jsonl", [
        {"id": "shirt", "question": "A shirt costs $20 after a 20% discount. What was the original price in dollars?",
         "options": {"A": "$24", "B": "$25", "C": "$30"}, "answer": "B"},
        {"id": "half", "question": "What is half of one third?", "options": {"A": "1/6", "B": "2/3", "C": "1/5"},
         "answer": "A"},
    ])
    dataset = root / "mcqa"
    run_mcqa(McqaJob(inputs=[str(source)], output=dataset, cleaning=Cleaning()), progress=False)
    return Built(dataset, *_boxed({row["id"]: row["answer"] for row in _rows(dataset)}))


BUILDERS = {"priming": build_priming, "multihop": build_multihop, "mcqa_open": build_mcqa}


@pytest.fixture(scope="module", params=sorted(BUILDERS))
def built(request, tmp_path_factory) -> Built:
    result = BUILDERS[request.param](tmp_path_factory.mktemp(request.param))
    assert result.right, f"the {request.param} fixture built no usable row"
    return result


@pytest.fixture(scope="module")
def policy(tmp_path_factory) -> Path:
    """A tiny random Qwen2 chat model: its tokenizer (byte-level BPE, ChatML template) is the one verl loads from
    actor_rollout_ref.model.path and the kit counts prompts with; TRL trains the model."""
    from tests.support.tiny_model import make_tiny_chat_model

    return make_tiny_chat_model(tmp_path_factory.mktemp("policy"))


def kit_overrides(script: Path) -> list[str]:
    """The overrides a kit's run_verl script gives main_ppo, as bash would pass them (MODEL and "$@" left out)."""
    command = script.read_text().split("python -m verl.trainer.main_ppo", 1)[1]
    return [word for word in shlex.split(command)
            if "=" in word and not word.startswith("actor_rollout_ref.model.path")]


def compose_ppo_config(overrides: list[str]):
    from hydra import compose, initialize_config_module

    with initialize_config_module("verl.trainer.config", version_base=None):
        return compose("ppo_trainer", overrides=overrides)


def verl_scores(config, tokenizer, items: list[dict], responses: list[str]) -> list[float]:
    """Scores through verl's reward loop: a DataProto as the rollout hands it over (the dataset's non-tensor columns,
    the response token ids and their attention mask) into a RewardLoopWorker built from the composed config."""
    import numpy as np
    import torch
    from verl import DataProto
    from verl.experimental.reward_loop import RewardLoopWorker
    from verl.utils.dataset.rl_dataset import collate_fn

    ids = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in responses]
    width = max(map(len, ids))
    tokens = torch.full((len(ids), width), tokenizer.pad_token_id)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for i, row in enumerate(ids):
        tokens[i, : len(row)], mask[i, : len(row)] = torch.tensor(row), 1
    columns = {k: v for k, v in collate_fn(items).items() if isinstance(v, np.ndarray)}
    data = DataProto.from_dict(tensors={"responses": tokens, "attention_mask": mask}, non_tensors=columns)
    worker = RewardLoopWorker(config)
    outputs = worker.loop.run_until_complete(worker.compute_score_batch(data))
    return [output["reward_score"] for output in outputs]


def test_verl_kits_load_and_score_in_verl(built, policy, tmp_path):
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    kit = tmp_path / "kit"
    result = run_handoff(built.dataset, "verl", kit, tokenizer=str(policy), progress=False)
    scripts = sorted(kit.glob("run_verl*.sh"))
    splits = {path.name.split("-")[0] for path in result.exports["rl"].files}
    # One kit per training split: train where there is one, else each of multi-hop's full, half, single.
    assert len(scripts) == (1 if "train" in splits else len(splits))
    tokenizer = AutoTokenizer.from_pretrained(policy)
    for script in scripts:
        config = compose_ppo_config([*kit_overrides(script), f"actor_rollout_ref.model.path={policy}"])
        assert config.reward.custom_reward_function.path == "pkg://curate.rewards.verl_reward"
        dataset = RLHFDataset(data_files=list(config.data.train_files), tokenizer=tokenizer, config=config.data)
        exported = sum(pq.ParquetFile(f).metadata.num_rows for f in config.data.train_files)
        assert len(dataset) == exported, f"{script.name}: verl dropped prompts longer than the kit's limit"
        items = [dataset[i] for i in range(len(dataset)) if dataset[i]["extra_info"]["id"] in built.right]
        assert items
        responses = [built.right[item["extra_info"]["id"]] for item in items]
        responses += [built.wrong[item["extra_info"]["id"]] for item in items]
        scores = verl_scores(config, tokenizer, items + items, responses)
        assert scores[: len(items)] == [1.0] * len(items), script.name
        assert all(score <= 0.1 for score in scores[len(items):]), (script.name, scores)

        # The limit is the longest prompt of the kit's train and val files exactly: one token less and verl's own
        # count drops a row of them.
        files = list(dict.fromkeys([*config.data.train_files, *config.data.val_files]))
        tight = compose_ppo_config([*kit_overrides(script), f"actor_rollout_ref.model.path={policy}",
                                    f"data.max_prompt_length={config.data.max_prompt_length - 1}"])
        kept = RLHFDataset(data_files=files, tokenizer=tokenizer, config=tight.data)
        assert len(kept) < sum(pq.ParquetFile(f).metadata.num_rows for f in files), script.name


def _load_script(path: Path):
    spec = importlib.util.spec_from_file_location(f"kit_{path.parent.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_trl_grpo_kit_scores_right_and_wrong_completions_in_grpo_trainer(built, policy, tmp_path):
    kit = tmp_path / "kit"
    result = run_handoff(built.dataset, "trl", kit, progress=False)
    grpo = _load_script(kit / "train_grpo.py")
    split = grpo.SPLITS[0]
    rows = {json.dumps(row["prompt"]): row["id"]
            for path in result.exports["rl"].files if path.name.startswith(f"{split}-")
            for row in pq.read_table(path).to_pylist()}

    def scripted_rollout(prompts: list, trainer) -> dict:
        # Step 1 answers every prompt rightly, step 2 wrongly; each completion ends with the policy's EOS.
        answers = built.right if trainer.state.global_step == 0 else built.wrong
        tokenizer = trainer.processing_class
        prompt_ids, completion_ids = [], []
        for prompt in prompts:
            text = answers.get(rows[json.dumps(prompt)])
            assert text is not None, "a prompt without a scripted answer (a priming row the builder got wrong)"
            prompt_ids.append(tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True,
                                                            return_dict=False))
            completion_ids.append(tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id])
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids,
                "logprobs": [[0.0] * len(ids) for ids in completion_ids]}

    args = grpo.parse_args(["--model", str(policy), "--max-steps", "2", "--batch-size", "2", "--num-generations", "2",
                            "--max-completion-length", "4096", "--cpu", "--output-dir", str(tmp_path / "grpo")])
    trainer = grpo.make_trainer(args, rollout_func=scripted_rollout)
    trainer.train()
    logged = [entry for entry in trainer.state.log_history if "rewards/curate_reward/mean" in entry]
    assert [entry["step"] for entry in logged] == [1, 2]
    assert logged[0]["rewards/curate_reward/mean"] == 1.0
    assert logged[1]["rewards/curate_reward/mean"] <= 0.1

