"""Trainer launch kits: what a user runs next, written next to the exported data.

verl:  OUT/rl/        the verl export (`curate export --to verl`)
       OUT/verl.yaml  config fragment: data paths, prompt and reward keys, custom_reward_function.path/.name,
                      with the data_source keys of the export and their row counts
       OUT/run_verl.sh  `python -m verl.trainer.main_ppo` with the same values as overrides, plus "$@"
TRL:   OUT/rl/, OUT/train_grpo.py   GRPOTrainer on the TRL export with the registry reward (curate.rewards.trl_reward)
       OUT/sft/, OUT/train_sft.py   SFTTrainer on the {query, completion} export (prompt-completion, loss on the
                                    completion only)
       Each part is written when the dataset has the columns for it (RL: data_source and a ground truth; SFT: a
       completion), at least one of them.
Both:  OUT/README.md  the commands, the splits and the rewards.

The scripts find their data relative to themselves, so the kit directory can be copied to the training machine
(which needs curate installed for the reward module).
"""

from __future__ import annotations

import json
import shlex
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from curate.errors import CurateError
from curate.files import atomic_path
from curate.handoff.export import ExportError, ExportResult, output_identity, run_export
from curate.handoff.jobs import HandoffJob
from curate.pipelines.state import write_once
from curate.rewards import REWARD_PATH, REWARDS

TRAINERS = ("verl", "trl")


class HandoffError(CurateError, ValueError):
    pass


@dataclass
class HandoffResult:
    output: Path
    trainer: str
    exports: dict[str, ExportResult] = field(default_factory=dict)  # "rl" / "sft" -> export
    files: list[Path] = field(default_factory=list)
    data_sources: Counter = field(default_factory=Counter)
    skipped: dict[str, str] = field(default_factory=dict)  # part -> why it was not written


def _data_sources(export: ExportResult) -> Counter:
    counts: Counter = Counter()
    for path in export.files:
        table = pq.read_table(path, columns=["data_source"])
        counts.update(table.column("data_source").to_pylist())
    return counts


def _splits(export: ExportResult) -> dict[str, list[str]]:
    splits: dict[str, list[str]] = {}
    for path in export.files:
        if pq.ParquetFile(path).metadata.num_rows:
            splits.setdefault(path.name.split("-")[0], []).append(path.name)
    return splits


def _write(path: Path, text: str, executable: bool = False) -> Path:
    with atomic_path(path) as partial:
        partial.write_text(text)
        if executable:
            partial.chmod(0o755)
    return path


def check_handoff(dataset: str | Path, trainer: str, output: str | Path) -> None:
    """An unknown trainer, or the dataset itself as the kit's folder, fail here, before the output is claimed."""
    if trainer not in TRAINERS:
        raise HandoffError(f"unknown trainer {trainer!r}; choose one of {', '.join(TRAINERS)}")
    if Path(output).resolve() == Path(dataset).resolve():
        raise HandoffError("the output must not be the dataset itself")


def handoff(job: HandoffJob, progress: bool = True) -> HandoffResult | None:
    """Runs `curate handoff`: claims the kit's folder with the identity of the exports it is made of (the dataset's
    files, the trainer, the prompt options; None when it is up to date), then writes the kit. A failed kit in a new
    folder leaves nothing behind (nothing there is worth resuming)."""
    check_handoff(job.dataset, job.trainer, job.output)
    what, inputs = output_identity(job.dataset, job.trainer, job.instruction, job.system)
    return write_once(job.output, "handoff", what, lambda: run_handoff(
        job.dataset, job.trainer, job.output, instruction=job.instruction, system=job.system, progress=progress),
        inputs=inputs, overwrite=job.overwrite, abandon=True)


def run_handoff(dataset: str | Path, trainer: str, output: str | Path, instruction: str | None = None,
                system: str | None = None, progress: bool = True) -> HandoffResult:
    check_handoff(dataset, trainer, output)
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    result = HandoffResult(output=output, trainer=trainer)
    parts = [("rl", "verl")] if trainer == "verl" else [("rl", "trl"), ("sft", "sft")]
    for part, target in parts:
        try:
            export = run_export(dataset, target, output / part, instruction=instruction, system=system, progress=progress)
        except ExportError as error:
            result.skipped[part] = str(error)
            continue
        if not sum(export.rows.values()):
            result.skipped[part] = f"no row could be exported (reasons in {output / part / 'rejects'})"
            continue
        result.exports[part] = export
    if not result.exports:
        raise HandoffError("nothing to hand off: " + "; ".join(f"{p}: {why}" for p, why in result.skipped.items()))
    if "rl" in result.exports:
        result.data_sources = _data_sources(result.exports["rl"])
    if trainer == "verl":
        result.files += _verl_kit(result)
    else:
        result.files += _trl_kit(result)
    result.files.append(_write(output / "README.md", _readme(result, Path(dataset))))
    return result


# --------------------------------------------------------------------------------------------- #
# verl
# --------------------------------------------------------------------------------------------- #
def verl_overrides(result: HandoffResult) -> dict[str, object]:
    export = result.exports["rl"]
    splits = _splits(export)
    data = export.output.resolve() / "data"
    train = [str(data / name) for name in splits.get("train", [])]
    if not train:
        raise HandoffError(f"the verl export has no train split (splits: {', '.join(splits) or 'none'})")
    val_split = next((s for s in ("validation", "val", "test") if s in splits), None)
    val = [str(data / name) for name in splits[val_split]] if val_split else train
    return {
        "data.train_files": train,
        "data.val_files": val,
        "data.prompt_key": "prompt",
        "data.reward_fn_key": "data_source",
        "custom_reward_function.path": str(REWARD_PATH.resolve()),
        "custom_reward_function.name": "compute_score",
    }


def _yaml_value(value: object) -> str:
    return json.dumps(value)  # JSON scalars and lists are valid YAML flow values


def _verl_kit(result: HandoffResult) -> list[Path]:
    overrides = verl_overrides(result)
    sources = "\n".join(f"#   {name}: {n:,} rows — {REWARDS[name].description}" for name, n in sorted(result.data_sources.items()))
    nested: dict[str, dict[str, object]] = {}
    for key, value in overrides.items():
        group, name = key.split(".", 1)
        nested.setdefault(group, {})[name] = value
    body = "\n".join(f"{group}:\n" + "\n".join(f"  {k}: {_yaml_value(v)}" for k, v in values.items())
                     for group, values in nested.items())
    same_val = overrides["data.val_files"] == overrides["data.train_files"]
    fragment = f"""# verl config fragment written by `curate handoff --trainer verl`; merge it into your PPO/GRPO config
# (or use run_verl.sh, which passes the same values as overrides).
# Rewards: each row's data_source selects a function in the registry file below:
{sources}
{"# No test split in the dataset: validation reuses the train files." if same_val else ""}
{body}
"""
    arguments = " \\\n    ".join(
        shlex.quote(f"{key}=[{','.join(shlex.quote(v) for v in value)}]" if isinstance(value, list) else f"{key}={value}")
        for key, value in overrides.items())
    script = f"""#!/usr/bin/env bash
# verl launch written by `curate handoff --trainer verl`. Usage: MODEL=Qwen/Qwen2.5-3B ./run_verl.sh [more overrides]
# e.g. algorithm.adv_estimator=grpo actor_rollout_ref.rollout.n=8 trainer.n_gpus_per_node=8
set -euo pipefail
: "${{MODEL:?set MODEL to the policy (hub name or local directory)}}"
python -m verl.trainer.main_ppo \\
    {arguments} \\
    actor_rollout_ref.model.path="$MODEL" \\
    "$@"
"""
    return [_write(result.output / "verl.yaml", fragment), _write(result.output / "run_verl.sh", script, executable=True)]


# --------------------------------------------------------------------------------------------- #
# TRL
# --------------------------------------------------------------------------------------------- #
GRPO_SCRIPT = '''"""GRPO with TRL on the curate RL export; rewards from the curate registry, selected per row by data_source.
Written by `curate handoff --trainer trl`. Example:
    python train_grpo.py --model Qwen/Qwen2.5-1.5B-Instruct --num-generations 8 --batch-size 8
"""

import argparse
from pathlib import Path

from datasets import load_dataset
from trl import GRPOConfig, GRPOTrainer

from curate.rewards import trl_reward

DATA = Path(__file__).resolve().parent / "rl" / "data"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="policy: hub name or local directory")
    parser.add_argument("--output-dir", default=str(Path(__file__).resolve().parent / "grpo"))
    parser.add_argument("--max-steps", type=int, default=-1, help="-1: run --epochs")
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--batch-size", type=int, default=8, help="completions per device and step")
    parser.add_argument("--num-generations", type=int, default=8, help="completions per prompt (the GRPO group)")
    parser.add_argument("--max-completion-length", type=int, default=1024)
    parser.add_argument("--learning-rate", type=float, default=1e-6)
    parser.add_argument("--cpu", action="store_true", help="train on the CPU")
    args = parser.parse_args()

    train = load_dataset("parquet", data_files=str(DATA / "train-*.parquet"), split="train")
    config = GRPOConfig(
        output_dir=args.output_dir, max_steps=args.max_steps, num_train_epochs=args.epochs,
        per_device_train_batch_size=args.batch_size, num_generations=args.num_generations,
        max_completion_length=args.max_completion_length, learning_rate=args.learning_rate,
        logging_steps=1, save_strategy="no", report_to="none", use_cpu=args.cpu,
    )
    # trl_reward() reads each row's `solution` (ground truth) and `data_source`; it returns None for a
    # completion that cannot be scored, which GRPO leaves out of the advantage.
    trainer = GRPOTrainer(model=args.model, reward_funcs=[trl_reward()], args=config, train_dataset=train)
    trainer.train()
    trainer.save_model(args.output_dir)


if __name__ == "__main__":
    main()
'''

SFT_SCRIPT = '''"""SFT with TRL on the curate {query, completion} export (loss on the completion only).
Written by `curate handoff --trainer trl`. Example:
    python train_sft.py --model Qwen/Qwen2.5-1.5B --epochs 2 --batch-size 16
"""

import argparse
from pathlib import Path

from datasets import load_dataset
from trl import SFTConfig, SFTTrainer

DATA = Path(__file__).resolve().parent / "sft" / "data"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="model: hub name or local directory")
    parser.add_argument("--output-dir", default=str(Path(__file__).resolve().parent / "sft-model"))
    parser.add_argument("--max-steps", type=int, default=-1, help="-1: run --epochs")
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-length", type=int, default=4096, help="tokens of prompt plus completion")
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    parser.add_argument("--cpu", action="store_true", help="train on the CPU")
    args = parser.parse_args()

    # TRL's prompt-completion format: `prompt` and `completion`.
    train = load_dataset("parquet", data_files=str(DATA / "train-*.parquet"), split="train")
    train = train.rename_column("query", "prompt").remove_columns(["id"])
    config = SFTConfig(
        output_dir=args.output_dir, max_steps=args.max_steps, num_train_epochs=args.epochs,
        per_device_train_batch_size=args.batch_size, max_length=args.max_length, learning_rate=args.learning_rate,
        completion_only_loss=True, logging_steps=1, save_strategy="no", report_to="none", use_cpu=args.cpu,
    )
    trainer = SFTTrainer(model=args.model, args=config, train_dataset=train)
    trainer.train()
    trainer.save_model(args.output_dir)


if __name__ == "__main__":
    main()
'''


def _trl_kit(result: HandoffResult) -> list[Path]:
    files = []
    for part, name, script in (("rl", "train_grpo.py", GRPO_SCRIPT), ("sft", "train_sft.py", SFT_SCRIPT)):
        export = result.exports.get(part)
        if export is None:
            continue
        if "train" not in _splits(export):
            result.skipped[part] = f"the {part} export has no train split"
            continue
        files.append(_write(result.output / name, script))
    if not files:
        raise HandoffError("no export has a train split: " + "; ".join(result.skipped.values()))
    return files


def _readme(result: HandoffResult, dataset: Path) -> str:
    rows = "\n".join(f"| {part} | {split} | {n:,} |" for part, export in result.exports.items()
                     for split, n in sorted(export.rows.items()))
    sources = "\n".join(f"| `{name}` | {n:,} | {REWARDS[name].description} |" for name, n in sorted(result.data_sources.items()))
    skipped = "\n".join(f"- {part}: not written ({why})" for part, why in result.skipped.items())
    if result.trainer == "verl":
        run = ("MODEL=Qwen/Qwen2.5-3B ./run_verl.sh algorithm.adv_estimator=grpo actor_rollout_ref.rollout.n=8\n"
               "# or merge verl.yaml into your own config")
    else:
        run = "\n".join(filter(None, [
            "python train_sft.py --model MODEL --epochs 2" if (result.output / "train_sft.py").exists() else "",
            "python train_grpo.py --model MODEL --num-generations 8" if (result.output / "train_grpo.py").exists() else "",
        ]))
    return f"""# Launch kit: {dataset.name} → {result.trainer}

Written by `curate handoff {dataset} --trainer {result.trainer}` from `{dataset.resolve()}`.

```bash
{run}
```

| export | split | rows |
|---|---|---|
{rows}

Rewards (each RL row's `data_source` names one; verl calls `compute_score` in `{REWARD_PATH.resolve()}`, TRL calls
`curate.rewards.trl_reward()`):

| data_source | rows | reward |
|---|---|---|
{sources or "| - | 0 | (no RL export) |"}

Rows that could not be exported are in `*/rejects/export.jsonl` with their reason.
{skipped}
"""
