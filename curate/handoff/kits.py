"""Trainer launch kits: what a user runs next, written next to the exported data.

verl:  OUT/rl/        the verl export (`curate export --to verl`)
       OUT/verl.yaml  config fragment in the keys verl 0.9.1's main_ppo reads: data paths, prompt and reward keys,
                      data.max_prompt_length (the longest prompt, measured), data.filter_overlong_prompts,
                      reward.custom_reward_function.path/.name (pkg://curate.rewards.verl_reward, compute_score),
                      with the data_source keys of the export and their row counts
       OUT/run_verl.sh  `python -m verl.trainer.main_ppo` with the same values as overrides, plus "$@"
       A dataset without a train split (multi-hop: full, half, single) gets one fragment and script per split:
       OUT/verl_<split>.yaml, OUT/run_verl_<split>.sh.
TRL:   OUT/rl/, OUT/train_grpo.py   GRPOTrainer on the TRL export with the registry reward (curate.rewards.trl_reward)
       OUT/sft/, OUT/train_sft.py   SFTTrainer on the {query, completion} export (prompt-completion, loss on the
                                    completion only)
       Each part is written when the dataset has the columns for it (RL: data_source and a ground truth; SFT: a
       completion), at least one of them; `--split` picks the split a script trains on (default: train, else the
       dataset's first split).
Both:  OUT/README.md  the commands, the splits and the rewards.

The scripts find their data relative to themselves, so the kit directory can be copied to the training machine, which
needs curate installed for the reward module (the reward imports the installed registry: no path of this machine is
written into a kit).
"""

from __future__ import annotations

import json
import shlex
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq
import yaml

from curate.errors import CurateError
from curate.files import atomic_path
from curate.handoff.export import ExportError, ExportResult, output_identity, run_export
from curate.handoff.jobs import HandoffJob
from curate.hf_tokenizers import load_tokenizer
from curate.pipelines.state import STATE, write_once
from curate.rewards import REWARDS

TRAINERS = ("verl", "trl")
# verl imports the reward as a module of the installed package: the same string on every machine, and no file loader
# (verl 0.9.1 runs a file outside sys.modules; older verl registered it as `custom_module`) is in the way.
REWARD_MODULE = "pkg://curate.rewards.verl_reward"
# With no tokenizer to count with, a prompt's UTF-8 bytes bound its tokens (a byte-level or byte-fallback token covers
# at least one byte), plus this many for the chat template's own tokens (Qwen2.5's default system message is ~30).
TEMPLATE_TOKENS_BOUND = 64


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
    # per RL export file, its longest prompt with the chat template: counted, or bounded (longest_prompts)
    prompt_tokens: dict[str, int] = field(default_factory=dict)
    tokenizer: str | None = None  # what counted prompt_tokens; None: a byte bound


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
    """An unknown trainer, the dataset itself as the kit's folder, or an export instead of the dataset it came from
    fail here, before the output is claimed."""
    if trainer not in TRAINERS:
        raise HandoffError(f"unknown trainer {trainer!r}; choose one of {', '.join(TRAINERS)}")
    if Path(output).resolve() == Path(dataset).resolve():
        raise HandoffError("the output must not be the dataset itself")
    record = Path(dataset) / STATE / "export.json"
    if record.is_file():
        source = json.loads(record.read_text()).get("dataset", "the dataset it was exported from")
        raise HandoffError(f"{dataset} is an export (a kit writes its own); hand off the dataset itself: "
                           f"curate handoff {source} --trainer {trainer} -o {output}")


def handoff(job: HandoffJob, progress: bool = True) -> HandoffResult | None:
    """Runs `curate handoff`: claims the kit's folder with the identity of the exports it is made of (the dataset's
    files, the trainer, the prompt options, the tokenizer; None when it is up to date), then writes the kit. A failed
    kit in a new folder leaves nothing behind (nothing there is worth resuming)."""
    check_handoff(job.dataset, job.trainer, job.output)
    what, inputs = output_identity(job.dataset, job.trainer, job.instruction, job.system)
    if job.tokenizer is not None:  # recorded only when given, so that kits claimed before --tokenizer stay up to date
        what["tokenizer"] = job.tokenizer
    return write_once(job.output, "handoff", what, lambda: run_handoff(
        job.dataset, job.trainer, job.output, instruction=job.instruction, system=job.system, tokenizer=job.tokenizer,
        progress=progress), inputs=inputs, overwrite=job.overwrite, abandon=True)


def run_handoff(dataset: str | Path, trainer: str, output: str | Path, instruction: str | None = None,
                system: str | None = None, tokenizer: str | None = None, progress: bool = True) -> HandoffResult:
    """Exports DATASET for TRAINER into OUTPUT and writes the kit. `tokenizer` (the policy's: a hub name or a local
    directory) counts the longest prompt for verl's data.max_prompt_length; without it the length is a byte bound."""
    check_handoff(dataset, trainer, output)
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    result = HandoffResult(output=output, trainer=trainer, tokenizer=tokenizer)
    parts = [("rl", "verl")] if trainer == "verl" else [("rl", "trl"), ("sft", "sft")]
    for part, target in parts:
        try:
            export = run_export(dataset, target, output / part, instruction=instruction, system=system,
                                progress=progress)
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
        result.prompt_tokens = longest_prompts(result.exports["rl"], tokenizer)
    if trainer == "verl":
        result.files += _verl_kit(result)
    else:
        result.files += _trl_kit(result)
    result.files.append(_write(output / "README.md", _readme(result, Path(dataset))))
    return result


def longest_prompts(export: ExportResult, tokenizer: str | None) -> dict[str, int]:
    """Each export file's longest prompt in tokens (by file name), as verl counts it (the chat template applied, with
    the generation prompt), under `tokenizer`; without one, a bound no byte-level tokenizer exceeds
    (TEMPLATE_TOKENS_BOUND)."""
    if tokenizer is not None:
        counter = load_tokenizer(tokenizer)
        if not counter.chat_template:
            raise HandoffError(f"the tokenizer {tokenizer} has no chat template, which verl applies to every prompt; "
                               "pass the policy's tokenizer (an instruct model's, or one whose config sets it)")

        def length(messages: list[dict]) -> int:
            ids = counter.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
            return len(ids)
    else:

        def length(messages: list[dict]) -> int:
            return sum(len((m.get("content") or "").encode()) for m in messages) + TEMPLATE_TOKENS_BOUND

    return {path.name: max(map(length, pq.read_table(path, columns=["prompt"]).column("prompt").to_pylist()),
                           default=0)
            for path in export.files}


# --------------------------------------------------------------------------------------------- #
# verl
# --------------------------------------------------------------------------------------------- #
def training_splits(export: ExportResult) -> list[str]:
    """The splits a kit trains on: `train` where the dataset has one, else each of its splits in turn (multi-hop's
    full, half and single are three training sets, not a train/test pair)."""
    splits = _splits(export)
    if not splits:
        raise HandoffError(f"the export in {export.output} has no rows")
    return ["train"] if "train" in splits else sorted(splits)


def verl_overrides(result: HandoffResult, split: str = "train") -> dict[str, object]:
    """The kit's overrides of verl's ppo_trainer config, in the keys verl 0.9.1's main_ppo reads, training on SPLIT."""
    export = result.exports["rl"]
    splits = _splits(export)
    data = export.output.resolve() / "data"
    if split not in splits:
        raise HandoffError(f"the verl export has no {split} split (splits: {', '.join(splits) or 'none'})")
    train = [str(data / name) for name in splits[split]]
    val_split = next((s for s in ("validation", "val", "test") if s in splits), None) if split == "train" else None
    val = [str(data / name) for name in splits[val_split]] if val_split else train
    return {
        "data.train_files": train,
        "data.val_files": val,
        "data.prompt_key": "prompt",
        "data.reward_fn_key": "data_source",
        # verl pads every prompt to this and cuts a longer one at rollout from the left, losing the problem's start;
        # filtering drops a prompt a policy's tokenizer makes longer than the count here, with a line in verl's log.
        "data.max_prompt_length": max(result.prompt_tokens[Path(f).name] for f in train + val),
        "data.filter_overlong_prompts": True,
        "reward.custom_reward_function.path": REWARD_MODULE,
        "reward.custom_reward_function.name": "compute_score",
    }


class _PlainDumper(yaml.SafeDumper):
    """Writes a list that appears twice (val_files = train_files) twice, not as an anchor and an alias."""

    def ignore_aliases(self, data) -> bool:
        return True


def _nested(overrides: dict[str, object]) -> dict:
    tree: dict = {}
    for key, value in overrides.items():
        *groups, name = key.split(".")
        node = tree
        for group in groups:
            node = node.setdefault(group, {})
        node[name] = value
    return tree


def _length_note(result: HandoffResult) -> str:
    if result.tokenizer:
        return f"the longest prompt of the kit's files, in tokens under {result.tokenizer}'s chat template"
    return (f"a bound on the longest prompt's tokens (its bytes plus {TEMPLATE_TOKENS_BOUND}); "
            "`curate handoff --tokenizer POLICY` counts them exactly")


def _verl_kit(result: HandoffResult) -> list[Path]:
    splits = training_splits(result.exports["rl"])
    files = []
    for split in splits:
        suffix = "" if split == "train" else f"_{split}"
        overrides = verl_overrides(result, split)
        files += [_write(result.output / f"verl{suffix}.yaml", _verl_fragment(result, overrides, split)),
                  _write(result.output / f"run_verl{suffix}.sh", _verl_script(overrides, split, f"run_verl{suffix}.sh"),
                         executable=True)]
    return files


def _verl_fragment(result: HandoffResult, overrides: dict[str, object], split: str) -> str:
    sources = "\n".join(f"#   {name}: {n:,} rows — {REWARDS[name].description}"
                        for name, n in sorted(result.data_sources.items()))
    same_val = overrides["data.val_files"] == overrides["data.train_files"]
    validation = (f"# Validation reuses the {split} files (the dataset has no test split).\n" if same_val else "")
    body = yaml.dump(_nested(overrides), Dumper=_PlainDumper, sort_keys=False, allow_unicode=True, width=1000)
    return f"""# verl config fragment written by `curate handoff --trainer verl` (training split: {split}), in the
# keys of verl 0.9.1's ppo_trainer config; merge it into your PPO/GRPO config, or use the run_verl script beside it,
# which passes the same values as overrides. curate must be installed in the trainer's Python: the reward is imported from
# it ({REWARD_MODULE}). With verl older than pkg:// support, use the file `curate reward-path` prints.
# data.max_prompt_length: {_length_note(result)}.
# Rewards: each row's data_source selects a function in the registry:
{sources}
{validation}{body}"""


def _verl_script(overrides: dict[str, object], split: str, name: str) -> str:
    arguments = " \\\n    ".join(
        shlex.quote(f"{key}=[{','.join(shlex.quote(v) for v in value)}]" if isinstance(value, list)
                    else f"{key}={value}")
        for key, value in overrides.items())
    return f"""#!/usr/bin/env bash
# verl launch written by `curate handoff --trainer verl` (training split: {split}).
# Usage: MODEL=Qwen/Qwen2.5-3B ./{name} [more overrides], e.g. algorithm.adv_estimator=grpo
# actor_rollout_ref.rollout.n=8 trainer.n_gpus_per_node=8. curate must be installed in this Python (the reward).
# BEHAVIORS=cues ./{name} ...: the reward also returns each completion's behavior counts (off by default: it costs
# a classification per completion), kept with every step's rollouts in ${{ROLLOUTS:-rollouts}}/, from which
# `curate audit-policy --rollouts` draws the behaviors over the steps (docs/rl-monitor.md).
set -euo pipefail
: "${{MODEL:?set MODEL to the policy (hub name or local directory)}}"
behaviors=()
if [ -n "${{BEHAVIORS:-}}" ]; then
    behaviors=(reward.custom_reward_function.path=pkg://curate.handoff.behavior_monitor
               reward.custom_reward_function.name=compute_score_with_behaviors
               "+reward.custom_reward_function.reward_kwargs.classifier=$BEHAVIORS"
               "trainer.rollout_data_dir=${{ROLLOUTS:-rollouts}}")
fi
python -m verl.trainer.main_ppo \\
    {arguments} \\
    actor_rollout_ref.model.path="$MODEL" \\
    ${{behaviors[@]+"${{behaviors[@]}}"}} \\
    "$@"
"""


# --------------------------------------------------------------------------------------------- #
# TRL
# --------------------------------------------------------------------------------------------- #
GRPO_SCRIPT = '''"""GRPO with TRL on the curate RL export; rewards from the curate registry, selected per row by
data_source. Written by `curate handoff --trainer trl`. Example:
    python train_grpo.py --model Qwen/Qwen2.5-1.5B-Instruct --num-generations 8 --batch-size 8 [--split NAME]
"""

import argparse
from pathlib import Path

from datasets import load_dataset
from trl import GRPOConfig, GRPOTrainer

from curate.rewards import trl_reward

DATA = Path(__file__).resolve().parent / "rl" / "data"
SPLITS = {splits}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="policy: hub name or local directory")
    parser.add_argument("--output-dir", default=str(Path(__file__).resolve().parent / "grpo"))
    parser.add_argument("--max-steps", type=int, default=-1, help="-1: run --epochs")
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--batch-size", type=int, default=8, help="completions per device and step")
    parser.add_argument("--num-generations", type=int, default=8, help="completions per prompt (the GRPO group)")
    parser.add_argument("--max-completion-length", type=int, default=1024)
    parser.add_argument("--learning-rate", type=float, default=1e-6)
    parser.add_argument("--split", default=SPLITS[0], choices=SPLITS, help="the dataset split to train on")
    parser.add_argument("--cpu", action="store_true", help="train on the CPU")
    parser.add_argument("--behaviors", metavar="CLASSIFIER", default=None,
                        help="log behavior metrics each step (behaviors/<behavior>/rate, ...) labelled by this "
                             "classifier (cues: CPU, no server), and keep every step's completions in "
                             "OUTPUT_DIR/completions/ for `curate audit-policy --rollouts` (docs/rl-monitor.md)")
    return parser.parse_args(argv)


def make_trainer(args: argparse.Namespace, **trainer_options) -> GRPOTrainer:
    """The kit's GRPOTrainer; trainer_options go to it as they are (callbacks=[...], peft_config=...)."""
    train = load_dataset("parquet", data_files=str(DATA / f"{args.split}-*.parquet"), split="train")
    config = GRPOConfig(
        output_dir=args.output_dir, max_steps=args.max_steps, num_train_epochs=args.epochs,
        per_device_train_batch_size=args.batch_size, num_generations=args.num_generations,
        max_completion_length=args.max_completion_length, learning_rate=args.learning_rate,
        logging_steps=1, save_strategy="no", report_to="none", use_cpu=args.cpu,
        log_completions=bool(args.behaviors), num_completions_to_print=0,
    )
    # trl_reward() reads each row's `solution` (ground truth) and `data_source`; it returns None for a
    # completion that cannot be scored, which GRPO leaves out of the advantage.
    reward = trl_reward()
    if args.behaviors:
        from curate.handoff.behavior_monitor import BehaviorMonitor

        # The reward's values and name stay as they are; the monitor logs beside them (one step late: it classifies
        # in a worker process while the trainer goes on).
        reward = BehaviorMonitor(args.behaviors).wrap(reward)
    return GRPOTrainer(model=args.model, reward_funcs=[reward], args=config, train_dataset=train,
                       **trainer_options)


def main() -> None:
    args = parse_args()
    trainer = make_trainer(args)
    trainer.train()
    trainer.save_model(args.output_dir)


if __name__ == "__main__":
    main()
'''

SFT_SCRIPT = '''"""SFT with TRL on the curate {query, completion} export (loss on the completion only).
Written by `curate handoff --trainer trl`. Example:
    python train_sft.py --model Qwen/Qwen2.5-1.5B --epochs 2 --batch-size 16 [--split NAME]
"""

import argparse
from pathlib import Path

from datasets import load_dataset
from trl import SFTConfig, SFTTrainer

DATA = Path(__file__).resolve().parent / "sft" / "data"
SPLITS = {splits}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="model: hub name or local directory")
    parser.add_argument("--output-dir", default=str(Path(__file__).resolve().parent / "sft-model"))
    parser.add_argument("--max-steps", type=int, default=-1, help="-1: run --epochs")
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-length", type=int, default=4096, help="tokens of prompt plus completion")
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    parser.add_argument("--split", default=SPLITS[0], choices=SPLITS, help="the dataset split to train on")
    parser.add_argument("--cpu", action="store_true", help="train on the CPU")
    args = parser.parse_args()

    # TRL's prompt-completion format: `prompt` and `completion`.
    train = load_dataset("parquet", data_files=str(DATA / f"{args.split}-*.parquet"), split="train")
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
        if export is not None:
            # The template's only placeholder; the script's own braces stay as they are.
            files.append(_write(result.output / name, script.replace("{splits}", repr(training_splits(export)))))
    return files


def _readme(result: HandoffResult, dataset: Path) -> str:
    rows = "\n".join(f"| {part} | {split} | {n:,} |" for part, export in result.exports.items()
                     for split, n in sorted(export.rows.items()))
    sources = "\n".join(f"| `{name}` | {n:,} | {REWARDS[name].description} |"
                        for name, n in sorted(result.data_sources.items()))
    skipped = "\n".join(f"- {part}: not written ({why})" for part, why in result.skipped.items())
    if result.trainer == "verl":
        run = "\n".join(
            f"MODEL=Qwen/Qwen2.5-3B ./{script.name} algorithm.adv_estimator=grpo actor_rollout_ref.rollout.n=8"
            for script in sorted(result.output.glob("run_verl*.sh"))) + "\n# or merge the verl*.yaml into your config"
        length = f"\n`data.max_prompt_length` in each kit: {_length_note(result)}.\n"
    else:
        splits = {part: training_splits(export) for part, export in result.exports.items()}
        scripts = (("sft", "train_sft.py", "--epochs 2"), ("rl", "train_grpo.py", "--num-generations 8"))
        run = "\n".join(f"python {script} --model MODEL {options} --split {split}"
                        for part, script, options in scripts for split in splits.get(part, []))
        length = ""
    return f"""# Launch kit: {dataset.name} → {result.trainer}

Written by `curate handoff {dataset} --trainer {result.trainer}` from `{dataset.resolve()}`.

```bash
{run}
```
{length}
| export | split | rows |
|---|---|---|
{rows}

Rewards (each RL row's `data_source` names one; verl imports `compute_score` from `{REWARD_MODULE}`, TRL calls
`curate.rewards.trl_reward()`). curate must be installed in the trainer's Python:

| data_source | rows | reward |
|---|---|---|
{sources or "| - | 0 | (no RL export) |"}

Rows that could not be exported are in `*/rejects/export.jsonl` with their reason.
{skipped}
"""
