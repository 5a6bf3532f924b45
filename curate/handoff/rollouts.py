"""The rollouts a GRPO run already wrote, read back one training step at a time (no sampling).

Two layouts, told apart by their file names:
    verl   trainer.rollout_data_dir=DIR: one DIR/{step}.jsonl per training step (verl 0.9.1's `_write_generations`),
           rows {input, output, gts, score, step, + every reward_extra_info key}; `score` is the sequence's reward
           (token_level_scores summed), `gts` the row's reward_model.ground_truth
    trl    GRPOConfig(log_completions=True): OUTPUT_DIR/completions/completions_{step:05d}.parquet (TRL 1.16), the
           last generation batch at each logging step, columns step, prompt, completion, one per reward function
           (its name), one per `log_extra` column, advantage

A row's score is the verl `score`, or for TRL the reward function's column `score_column` names (by default the one
reward column there is: a table with several must name it). A TRL table gets a ground truth only where the run
logged one (the behavior monitor logs `ground_truth`), which is what lets a Countdown completion be read below its
problem statement as the classifiers were measured.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from curate.errors import CurateError

VERL, TRL = "verl", "trl"
TRL_FIXED_COLUMNS = {"step", "prompt", "completion", "advantage", "image", "images"}
# Columns the behavior monitor logs beside the rewards (curate.handoff.behavior_monitor): never a score.
MONITOR_COLUMN_PREFIX = "behavior_"
GROUND_TRUTH = "ground_truth"


class RolloutError(CurateError, ValueError):
    pass


@dataclass
class Rollout:
    step: int
    prompt: str
    output: str
    score: float | None
    ground_truth: object = None


@dataclass
class RolloutFiles:
    layout: str
    directory: Path
    steps: list[tuple[int, Path]]  # (step, file), in step order


def find_rollouts(directory: str | Path) -> RolloutFiles:
    """The step files of a run's rollout folder: verl's rollout_data_dir, or a TRL output_dir (or its completions/)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise RolloutError(f"--rollouts {directory}: no such directory (give verl's trainer.rollout_data_dir or TRL's "
                           "output_dir with log_completions=True)")
    verl = [(int(p.stem), p) for p in directory.glob("*.jsonl") if p.stem.isdigit()]
    trl_dir = directory / "completions" if (directory / "completions").is_dir() else directory
    trl = [(int(m.group(1)), p) for p in trl_dir.glob("completions_*.parquet")
           if (m := re.fullmatch(r"completions_(\d+)\.parquet", p.name))]
    if verl and trl:
        raise RolloutError(f"{directory} holds both verl step files ({{step}}.jsonl) and TRL completions parquet; "
                           "point --rollouts at one run")
    if not verl and not trl:
        raise RolloutError(f"{directory} has no rollout files: verl writes {{step}}.jsonl under "
                           "trainer.rollout_data_dir, TRL writes completions/completions_*.parquet under output_dir "
                           "with GRPOConfig(log_completions=True)")
    return RolloutFiles(VERL if verl else TRL, directory, sorted(verl or trl))


def read_step(files: RolloutFiles, path: Path, score_column: str | None = None) -> list[Rollout]:
    return _verl_rows(path) if files.layout == VERL else _trl_rows(path, score_column)


def _number(value) -> float | None:
    """A score, or None where there is none (TRL writes NaN for a reward function that returned None)."""
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def _verl_rows(path: Path) -> list[Rollout]:
    rows = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as error:
                raise RolloutError(f"{path}:{number}: not a JSON line ({error}); is this verl's rollout_data_dir?") \
                    from None
            missing = {"input", "output", "score"} - set(record)
            if missing:
                raise RolloutError(f"{path}:{number}: no {', '.join(sorted(missing))} field; verl's rollout rows have "
                                   "input, output, gts, score, step")
            rows.append(Rollout(step=int(record.get("step", path.stem)), prompt=record["input"] or "",
                                output=record["output"] or "", score=_number(record["score"]),
                                ground_truth=record.get("gts")))
    return rows


def trl_score_column(columns: list[str], score_column: str | None, path: Path) -> str:
    rewards = [c for c in columns if c not in TRL_FIXED_COLUMNS and c != GROUND_TRUTH
               and not c.startswith(MONITOR_COLUMN_PREFIX)]
    if score_column is not None:
        if score_column not in columns:
            raise RolloutError(f"{path}: no column {score_column!r} for --score-column (columns: {', '.join(columns)})")
        return score_column
    if len(rewards) != 1:
        raise RolloutError(f"{path}: {len(rewards)} candidate reward columns ({', '.join(rewards) or 'none'}); name "
                           "the one whose full mark (1.0) means correct with --score-column")
    return rewards[0]


def message_text(value) -> str:
    """A completion as text: TRL logs a plain string, or a conversation (the assistant messages' contents)."""
    if isinstance(value, list):
        return "".join(m.get("content") or "" for m in value if isinstance(m, dict) and m.get("role") == "assistant")
    return "" if value is None else str(value)


def _prompt_text(value) -> str:
    if isinstance(value, list):
        return "\n".join(str(m.get("content") or "") for m in value if isinstance(m, dict))
    return "" if value is None else str(value)


def _trl_rows(path: Path, score_column: str | None) -> list[Rollout]:
    table = pq.read_table(path)
    column = trl_score_column(table.column_names, score_column, path)
    if "completion" not in table.column_names:
        raise RolloutError(f"{path}: no completion column; is this TRL's completions_*.parquet?")
    step_from_name = int(re.findall(r"\d+", path.stem)[-1])
    return [Rollout(step=int(row.get("step", step_from_name)), prompt=_prompt_text(row.get("prompt")),
                    output=message_text(row["completion"]), score=_number(row[column]),
                    ground_truth=row.get(GROUND_TRUTH))
            for row in table.to_pylist()]

