"""Behavior curves from a GRPO run: `curate audit-policy --rollouts` over the files verl 0.9.1 and TRL 1.16 write
themselves, and the live monitor's metrics in their own logs, each checked against a count made here with the
classifier called directly on the same completions."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers import get_classifier
from curate.cli import app
from curate.rewards import compute_score

TRACES = Path(__file__).resolve().parents[2] / "evals" / "blindset" / "countdown_traces.jsonl"


def countdown_traces(n: int) -> list[dict]:
    rows = [json.loads(line) for line in TRACES.read_text(encoding="utf-8").splitlines() if line.strip()]
    return rows[:n]


def expected_figures(outputs: list[str], problems: list[dict | None], scores: list[float]) -> dict:
    """Share, mean count and accuracy with / without each behavior, counted here: the classifier on each output
    below its problem, written as the labeled sets show it ("Numbers: [..], target: T"). An empty output has no
    label and stays out of the behavior figures, as in audit-policy; accuracy counts every output."""
    cues = get_classifier("cues")
    figures = {"accuracy": sum(s == 1.0 for s in scores) / len(scores)}
    kept = [(o, p, s) for o, p, s in zip(outputs, problems, scores) if o.strip()]
    texts = [o if p is None else f"Numbers: {json.dumps(p['numbers'])}, target: {p['target']}\n\n{o}"
             for o, p, _ in kept]
    counts = [label.counts for label in cues.classify(texts)]
    correct = [s == 1.0 for _, _, s in kept]
    for b in BEHAVIOR_NAMES:
        showing = [c[b] > 0 for c in counts]
        with_it = [ok for ok, shown in zip(correct, showing) if shown]
        without = [ok for ok, shown in zip(correct, showing) if not shown]
        figures[b] = {"rate": sum(showing) / len(showing), "mean_count": sum(c[b] for c in counts) / len(counts),
                      "accuracy_with": sum(with_it) / len(with_it) if with_it else None,
                      "accuracy_without": sum(without) / len(without) if without else None}
    return figures


def kit_launch_arguments(kit: Path, model: Path, tmp_path: Path, **env: str) -> list[str]:
    """The arguments the kit's run_verl.sh, run by bash, hands `python -m verl.trainer.main_ppo`: a `python` first on
    PATH writes them down instead of starting verl."""
    import os
    import subprocess

    bin_dir, argv = tmp_path / "bin", tmp_path / "argv.txt"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python").write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$ARGV_FILE"\n')
    (bin_dir / "python").chmod(0o755)
    subprocess.run(["bash", str(kit / "run_verl.sh")], check=True, env={
        **os.environ, **env, "PATH": f"{bin_dir}:{os.environ['PATH']}", "MODEL": str(model), "ARGV_FILE": str(argv)})
    words = argv.read_text().splitlines()
    assert words[:2] == ["-m", "verl.trainer.main_ppo"]
    return words[2:]


def verl_reward_worker(overrides: list[str]):
    """verl 0.9.1's reward loop worker on its own ppo_trainer config composed with `overrides`, as main_ppo
    composes it."""
    import verl
    from hydra import compose, initialize_config_dir
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        config = compose("ppo_trainer", overrides=overrides)
    assert config.reward.custom_reward_function.name == "compute_score_with_behaviors"
    return RewardLoopWorker(config), config


def verl_batch(tokenizer, responses: list[str], ground_truths: list[dict]):
    """A rollout batch as verl's reward manager reads it: prompt and response ids, the attention mask over both,
    data_source and reward_model per row."""
    import numpy as np
    import torch
    from verl import DataProto

    ids = [tokenizer(text, add_special_tokens=False).input_ids for text in responses]
    width, pad = max(map(len, ids)), tokenizer.pad_token_id
    mask = [[1] * 4 + [1] * len(row) + [0] * (width - len(row)) for row in ids]
    return DataProto.from_dict(
        tensors={"prompts": torch.full((len(ids), 4), pad), "attention_mask": torch.tensor(mask),
                 "responses": torch.tensor([row + [pad] * (width - len(row)) for row in ids])},
        non_tensors={"data_source": np.array(["curate/countdown"] * len(ids), dtype=object),
                     "reward_model": np.array([{"ground_truth": g} for g in ground_truths], dtype=object)})


@pytest.mark.slow  # verl's reward loop and trainer modules (ray, hydra) take most of its 10-20 s to import
def test_verl_reward_loop_carries_behavior_counts_to_its_rollout_files_and_validation_metrics(tmp_path):
    # verl's trainer module imports torchdata and peft beyond what its dataset and reward loop need.
    pytest.importorskip("verl.trainer.ppo.ray_trainer",
                        reason="verl 0.9.1 with torchdata and peft not installed (the trainers test extra: README)")
    import numpy as np
    from transformers import AutoTokenizer
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    from curate.handoff.kits import run_handoff
    from curate.handoff.policy_audit import write_task_prompts
    from tests.support.tiny_model import make_tiny_chat_model

    model = make_tiny_chat_model(tmp_path / "model")
    tokenizer = AutoTokenizer.from_pretrained(model)
    # The kit switches the monitor on with BEHAVIORS; without it, the plain reward and no rollout files.
    kit = tmp_path / "kit"
    run_handoff(write_task_prompts("countdown", 2, 0, tmp_path / "prompts"), "verl", kit, progress=False)
    plain = kit_launch_arguments(kit, model, tmp_path)
    assert "reward.custom_reward_function.name=compute_score" in plain
    assert not any("behavior" in word or "rollout_data_dir" in word for word in plain)
    rollouts = tmp_path / "rollouts"
    worker, config = verl_reward_worker(kit_launch_arguments(kit, model, tmp_path, BEHAVIORS="cues",
                                                             ROLLOUTS=str(rollouts)))
    assert config.trainer.rollout_data_dir == str(rollouts)
    assert config.reward.custom_reward_function.reward_kwargs.classifier == "cues"
    traces = countdown_traces(24)
    by_step = {}
    for step, start in ((1, 0), (2, 8), (10, 16)):  # file names sort as text otherwise: 10 before 2
        chunk = traces[start:start + 8]
        outputs, gts = [t["text"] for t in chunk], [{"numbers": t["numbers"], "target": t["target"]} for t in chunk]
        scored = worker.loop.run_until_complete(worker.compute_score_batch(verl_batch(tokenizer, outputs, gts)))
        scores = [item["reward_score"] for item in scored]
        assert scores == [compute_score("curate/countdown", o, g) for o, g in zip(outputs, gts)]  # the plain reward
        # What verl's agent loop makes of the extras (one array per key of the first row) and hands the trainer.
        extras = {key: np.array([item["reward_extra_info"][key] for item in scored]).tolist()
                  for key in scored[0]["reward_extra_info"]}
        expected = get_classifier("cues").classify(
            [f"Numbers: {json.dumps(g['numbers'])}, target: {g['target']}\n\n{o}" for o, g in zip(outputs, gts)])
        for b in BEHAVIOR_NAMES:
            assert extras[f"behavior_{b}"] == [label.counts[b] for label in expected]
            assert extras[f"behavior_{b}_shown"] == [float(label.counts[b] > 0) for label in expected]
        # The trainer's validation metrics over these extras (its own reduction) ...
        metrics = RayPPOTrainer._val_metrics_update(None, ["curate/countdown"] * 8, [str(i) for i in range(8)],
                                                    {"reward": scores, **extras}, [])
        for b in BEHAVIOR_NAMES:
            counts = [label.counts[b] for label in expected]
            assert metrics[f"val-aux/curate/countdown/behavior_{b}/mean@1"] == pytest.approx(sum(counts) / 8)
            assert metrics[f"val-aux/curate/countdown/behavior_{b}_shown/mean@1"] == pytest.approx(
                sum(c > 0 for c in counts) / 8)
        # ... and its rollout dump, as it writes it after each step into trainer.rollout_data_dir.
        RayPPOTrainer._write_generations([f"prompt {i}" for i in range(8)], outputs, gts, scores, extras,
                                         config.trainer.rollout_data_dir, step)
        by_step[step] = (outputs, gts, scores)
    assert sorted(p.name for p in rollouts.iterdir()) == ["1.jsonl", "10.jsonl", "2.jsonl"]
    assert "behavior_verification" in json.loads((rollouts / "1.jsonl").read_text().splitlines()[0])

    out = tmp_path / "audit"
    result = CliRunner().invoke(app, ["audit-policy", "--rollouts", str(rollouts), "-o", str(out)])
    assert result.exit_code == 0, result.output
    sweep = json.loads((out / "sweep.json").read_text())
    assert sweep["steps"] == [1, 2, 10] and sweep["layout"] == "verl"
    for index, step in enumerate(sweep["steps"]):
        expected = expected_figures(*by_step[step])
        assert sweep["accuracy"][index] == expected["accuracy"]
        for b in BEHAVIOR_NAMES:
            for figure in ("rate", "mean_count", "accuracy_with", "accuracy_without"):
                assert sweep["behaviors"][b][figure][index] == pytest.approx(expected[b][figure]), (step, b, figure)
        assert sweep["audits"][index]["samples"] == 8 and sweep["audits"][index]["prompts"] == 8
    assert 0 < sweep["accuracy"][0] < 1 and any(v > 0 for v in sweep["behaviors"]["verification"]["rate"])
    samples = pq.read_table(out / "samples.parquet").to_pylist()
    assert [s["step"] for s in samples] == [1] * 8 + [2] * 8 + [10] * 8
    assert [s["text"] for s in samples] == [t["text"] for t in traces]
    assert (out / "behaviors_over_steps.png").read_bytes()[:4] == b"\x89PNG"
    assert "| 10 | `10.jsonl` |" in (out / "README.md").read_text()

    refused = CliRunner().invoke(app, ["audit-policy", "--rollouts", str(tmp_path / "model"), "-o",
                                       str(tmp_path / "x")])
    assert refused.exit_code != 0 and "no rollout files" in refused.output


# Whole cue sentences as single tokens of a tiny random model, which may write nothing else: its completions are
# random sequences of them, so the behaviors vary from completion to completion as a real policy's do.
PHRASES = [" Let me verify this: 3 + 4 = 7, correct.", " Wait, that is wrong, let me try again.",
           " First, we need to get the target, then use the rest.",
           " Working backwards from the target, we need 5 * 9.", " So 50 - 5 = 45.", " Hmm.", " The answer is 45."]


def phrase_model(directory: Path) -> tuple[Path, list[int]]:
    """A tiny chat model whose vocabulary has PHRASES as tokens, and every other token id (to suppress)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tests.support.tiny_model import make_tiny_chat_model

    make_tiny_chat_model(directory, seed=5)
    tokenizer = AutoTokenizer.from_pretrained(directory)
    tokenizer.add_tokens(PHRASES)
    model = AutoModelForCausalLM.from_pretrained(directory)
    model.resize_token_embeddings(len(tokenizer))
    tokenizer.save_pretrained(directory)
    model.save_pretrained(directory)
    allowed = set(tokenizer.convert_tokens_to_ids(PHRASES)) | {tokenizer.eos_token_id}
    return directory, [i for i in range(len(tokenizer)) if i not in allowed]


def length_parity_reward(completions, completion_ids, log_extra, **kwargs):
    """The full mark for an even number of completion tokens: a reward with right and wrong answers in every batch
    (the random model never solves a Countdown problem). It logs each length, which the recount reads back."""
    log_extra("n_tokens", [len(ids) for ids in completion_ids])
    return [1.0 if len(ids) % 2 == 0 else 0.0 for ids in completion_ids]


@pytest.mark.slow
def test_trl_grpo_logs_behavior_metrics_and_its_completions_redraw_them(tmp_path):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from curate.handoff.behavior_monitor import BehaviorMonitor
    from curate.handoff.policy_audit import countdown_prompts

    model, suppressed = phrase_model(tmp_path / "model")
    prompts = countdown_prompts(8, seed=1)
    train = Dataset.from_list([{"prompt": p["question"], "solution": p["ground_truth"],
                                "data_source": p["data_source"]} for p in prompts])
    config = GRPOConfig(output_dir=str(tmp_path / "run"), use_cpu=True, max_steps=3, per_device_train_batch_size=8,
                        num_generations=4, max_completion_length=10, logging_steps=1, log_completions=True,
                        num_completions_to_print=0, report_to="none", save_strategy="no", seed=0,
                        gradient_checkpointing=False,
                        generation_kwargs={"suppress_tokens": suppressed})
    monitor = BehaviorMonitor("cues")  # asynchronous: batch k's figures are logged with batch k+1
    trainer = GRPOTrainer(model=str(model), reward_funcs=[monitor.wrap(length_parity_reward)], args=config,
                          train_dataset=train)
    trainer.train()
    monitor.close()

    logs = {entry["step"]: entry for entry in trainer.state.log_history if "rewards/length_parity_reward/mean" in entry}
    assert sorted(logs) == [1, 2, 3]
    assert not any(key.startswith("behaviors/") for key in logs[1])  # nothing classified before the first batch
    tables = {step: pq.read_table(tmp_path / "run" / "completions" / f"completions_{step:05d}.parquet").to_pylist()
              for step in (1, 2, 3)}
    shown = 0
    for step in (1, 2):
        rows, logged = tables[step], logs[step + 1]
        assert len(rows) == 8 and logged["behaviors/step"] == step
        assert all(json.loads(r["ground_truth"]) in [p["ground_truth"] for p in prompts] for r in rows)
        outputs, problems = [r["completion"] for r in rows], [json.loads(r["ground_truth"]) for r in rows]
        scores = [r["length_parity_reward"] for r in rows]
        expected = expected_figures(outputs, problems, scores)
        assert logged["behaviors/accuracy"] == pytest.approx(expected["accuracy"])
        for b in BEHAVIOR_NAMES:
            for figure in ("rate", "mean_count", "accuracy_with", "accuracy_without"):
                want = expected[b][figure]
                assert logged.get(f"behaviors/{b}/{figure}") == (None if want is None else pytest.approx(want))
            texts = [f"Numbers: {json.dumps(p['numbers'])}, target: {p['target']}\n\n{o}"
                     for o, p in zip(outputs, problems)]
            counts = [label.counts[b] for label in get_classifier("cues").classify(texts)]
            with_it = [r["n_tokens"] for r, c in zip(rows, counts) if c > 0 and r["completion"].strip()]
            if with_it:
                assert logged[f"behaviors/{b}/length_with"] == pytest.approx(sum(with_it) / len(with_it))
            shown += bool(with_it)
        # The wrapped reward keeps its name and values: TRL's own reward mean is the table's.
        assert logs[step]["rewards/length_parity_reward/mean"] == pytest.approx(sum(scores) / len(scores))
    assert shown >= 4  # the completions do show behaviors, so the figures above are not all zeros

    # The same run's logged completions, read back by audit-policy: the curves of the trainer's log, step for step.
    out = tmp_path / "audit"
    result = CliRunner().invoke(app, ["audit-policy", "--rollouts", str(tmp_path / "run"), "--score-column",
                                      "length_parity_reward", "-o", str(out)])
    assert result.exit_code == 0, result.output
    sweep = json.loads((out / "sweep.json").read_text())
    assert sweep["steps"] == [1, 2, 3] and sweep["layout"] == "trl"
    for step in (1, 2):
        for b in BEHAVIOR_NAMES:
            assert sweep["behaviors"][b]["rate"][step - 1] == pytest.approx(logs[step + 1][f"behaviors/{b}/rate"])
        assert sweep["accuracy"][step - 1] == pytest.approx(logs[step + 1]["behaviors/accuracy"])

    # The TRL kit's --behaviors wires the same monitor around curate's reward, and keeps the completions.
    import importlib.util

    from curate.handoff.kits import run_handoff
    from curate.handoff.policy_audit import write_task_prompts

    kit = tmp_path / "kit"
    run_handoff(write_task_prompts("countdown", 2, 0, tmp_path / "prompts"), "trl", kit, progress=False)
    spec = importlib.util.spec_from_file_location("kit_train_grpo", kit / "train_grpo.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    kit_trainer = script.make_trainer(script.parse_args(["--model", str(model), "--cpu", "--behaviors", "cues",
                                                         "--output-dir", str(tmp_path / "kit-run")]))
    assert kit_trainer.args.log_completions and kit_trainer.reward_func_names == ["curate_reward"]
    logged, extras = {}, {}
    call = {"prompts": ["p"] * 2, "completions": [" Wait, that is wrong, let me try again."] * 2,
            "completion_ids": [[1, 2]] * 2, "solution": [prompts[0]["ground_truth"]] * 2,
            "data_source": ["curate/countdown"] * 2, "log_metric": logged.__setitem__,
            "log_extra": extras.__setitem__, "trainer_state": SimpleNamespace(global_step=0)}
    assert kit_trainer.reward_funcs[0](**call) == [0.0, 0.0] and logged == {}  # the first batch is being classified
    kit_trainer.reward_funcs[0](**call)
    assert logged["behaviors/backtracking/rate"] == 1.0 and logged["behaviors/step"] == 1
    assert json.loads(extras["ground_truth"][0]) == prompts[0]["ground_truth"]


def test_batch_figures_leave_out_what_they_cannot_measure_and_refuse_served_classifiers():
    from curate.handoff.behavior_monitor import BehaviorMonitorError, batch_classifier, batch_figures

    none = {b: 0 for b in BEHAVIOR_NAMES}
    counts = [{**none, "verification": 2}, {**none, "verification": 1}, none, None]  # the last output was empty
    figures = batch_figures(counts, [1.0, 0.1, 0.0, 1.0], lengths=[30, 10, 5, 0])
    assert figures["behaviors/accuracy"] == 0.5  # 2 of 4 at the full mark; 0.1 is Countdown's format score
    assert figures["behaviors/verification/rate"] == 2 / 3 and figures["behaviors/verification/mean_count"] == 1.0
    assert figures["behaviors/verification/accuracy_with"] == 0.5
    assert figures["behaviors/verification/accuracy_without"] == 0.0
    assert (figures["behaviors/verification/length_with"], figures["behaviors/verification/length_without"]) == (20, 5)
    assert "behaviors/backtracking/accuracy_with" not in figures  # nothing shows it: left out, not 0
    assert figures["behaviors/backtracking/rate"] == 0.0
    with pytest.raises(BehaviorMonitorError, match="needs a model server"):
        batch_classifier("llm")
    with pytest.raises(BehaviorMonitorError, match="unknown classifier"):
        batch_classifier("no-such-classifier")
