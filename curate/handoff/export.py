"""One export for every builder: a built dataset → the input format of a trainer.

Input: a dataset directory in the builders' layout (DATASET/data/<split>-*.parquet; the split is the
file-name prefix) or a parquet file / folder of parquet files. Rows need `id`, `question`, and, per
target, `answer` / `ground_truth` (the reward's ground truth; `ground_truth` wins, then a verl-style
`reward_model.ground_truth`, then `answer`),
`data_source` (a registered reward), a completion (`completion`, `response`, `trace`, `output` or
`solution`) or `text`. A dataset that carries its finished prompt in `query` (priming: the TinyZero prompt its
SFT and RL rows share) is exported with that prompt, so every target sees the prompt the builder wrote. The
answer-format instruction is appended only when the prompt does not already ask for that format (it holds the
instruction or the reward's marker, e.g. `<answer>` or `\\boxed`): an instruction is never given twice.

Targets (columns written):
    verl      data_source, prompt (chat list), ability, reward_model{style, ground_truth},
              extra_info{split, index, id, question, answer, + the dataset's other scalar columns}
    trl       prompt (chat list), solution (ground truth), data_source, id, + the dataset's other scalar columns
              (format_score ...), which GRPOTrainer hands to the reward as keywords   (GRPOTrainer + trl_reward())
    openrlhf  input (prompt text), label (ground truth as text), data_source, id
    sft       query, completion, id
    cpt       text, id

Output: OUT/data/<split>-NNNNN.parquet (one per input file, numbered within its split; data/ and rejects/ are
written under .partial names and swapped in whole),
OUT/rejects/export.jsonl (every row that could not be exported, with its reason), OUT/README.md,
OUT/.curate/export.json (parameters and counts). Rows stream in record batches.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from curate.console import ProgressBar
from curate.data_cards.cards import load_snippet, render_card, reproduce_command, save_card, size_category
from curate.dataset_files import dataset_files, split_of
from curate.errors import CurateError
from curate.files import atomic_folder, write_text_atomic
from curate.handoff.jobs import ExportJob
from curate.pipelines.state import STATE, folder_signature, write_once
from curate.rewards.registry import REWARDS, UnknownRewardError, get_reward

TARGETS = ("verl", "trl", "openrlhf", "sft", "cpt")
COMPLETION_COLUMNS = ("completion", "response", "trace", "output", "solution")

MESSAGES = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
SCALAR = (pa.types.is_string, pa.types.is_large_string, pa.types.is_integer, pa.types.is_floating, pa.types.is_boolean)


class ExportError(CurateError, ValueError):
    """The dataset as a whole cannot be exported (missing columns, no files)."""


class RowRejected(ValueError):
    """One row cannot be exported; the message is its reason."""


@dataclass
class ExportResult:
    output: Path
    target: str
    rows: Counter = field(default_factory=Counter)  # per split
    rejected: Counter = field(default_factory=Counter)  # per reason
    files: list[Path] = field(default_factory=list)


def input_files(dataset: Path) -> list[tuple[str, Path]]:
    """(split, file) for every parquet file of the dataset (dataset_files: a file, DIR/data at any depth, or the
    parquet files directly in DIR, not in its folders), sorted; ExportError when there is none."""
    dataset = Path(dataset)
    if not dataset.exists():
        raise ExportError(f"{dataset} does not exist")
    files = dataset_files(dataset, nested=False)
    if not files:
        raise ExportError(f"no parquet files in {dataset} (expected {dataset}/data/<split>-*.parquet)")
    return [(split_of(f), f) for f in files]


NESTED_GOLD = "reward_model.ground_truth"


def _ground_truth_column(schema: pa.Schema) -> str | None:
    if "ground_truth" in schema.names:
        return "ground_truth"
    # Builders that already write verl columns (priming) keep the structured ground truth there; their
    # `answer` is a reference solution, not what the reward compares against.
    reward_model = schema.field("reward_model").type if "reward_model" in schema.names else None
    if reward_model is not None and pa.types.is_struct(reward_model) and reward_model.get_field_index("ground_truth") >= 0:
        return NESTED_GOLD
    return "answer" if "answer" in schema.names else None


def _gold_type(schema: pa.Schema, column: str | None) -> pa.DataType:
    if column is None:
        return pa.string()
    if column == NESTED_GOLD:
        return schema.field("reward_model").type.field("ground_truth").type
    return schema.field(column).type


def _gold(row: dict, column: str):
    if column == NESTED_GOLD:
        return (row.get("reward_model") or {}).get("ground_truth")
    return row.get(column)


def _completion_column(schema: pa.Schema) -> str | None:
    return next((c for c in COMPLETION_COLUMNS if c in schema.names), None)


class Exporter:
    """Turns rows of one input schema into rows of one target schema."""

    def __init__(self, target: str, schema: pa.Schema, instruction: str | None, system: str | None):
        if target not in TARGETS:
            raise ExportError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
        self.target = target
        self.instruction = instruction
        self.system = system
        self.gold = _ground_truth_column(schema)
        self.completion = _completion_column(schema)
        query = schema.field("query").type if "query" in schema.names else None
        self.prompt_column = "query" if query is not None and pa.types.is_string(query) else "question"
        needed = {"verl": ["question", "data_source"], "trl": ["question", "data_source"],
                  "openrlhf": ["question", "data_source"], "sft": ["question"], "cpt": []}[target]
        missing = [f"`{c}`" for c in needed if c not in schema.names]
        if target in ("verl", "trl", "openrlhf") and self.gold is None:
            missing.append("a ground truth (`ground_truth` or `answer`)")
        if target == "sft" and self.completion is None:
            missing.append(f"a completion ({' / '.join(f'`{c}`' for c in COMPLETION_COLUMNS)})")
        if target == "cpt" and "text" not in schema.names and not ("question" in schema.names and self.completion):
            missing.append("`text` (or `question` and a completion)")
        if missing:
            raise ExportError(f"{target} needs columns the dataset lacks: {'; '.join(missing)} "
                              f"(it has {', '.join(schema.names)})")
        used = {"question", "answer", "ground_truth", "data_source", "ability", "id", "prompt", "text", "split", "index",
                self.completion, self.prompt_column}
        self.extra = [f for f in schema if f.name not in used and any(test(f.type) for test in SCALAR)]
        self.schema = self._schema(schema)

    def _schema(self, schema: pa.Schema) -> pa.Schema:
        gold_type = _gold_type(schema, self.gold)
        if self.target == "verl":
            answer_type = schema.field("answer").type if "answer" in schema.names else pa.string()
            extra_info = pa.struct([("split", pa.string()), ("index", pa.int64()), ("id", pa.string()),
                                    ("question", pa.string()), ("answer", answer_type), *self.extra])
            return pa.schema([("data_source", pa.string()), ("prompt", MESSAGES), ("ability", pa.string()),
                              ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", gold_type)])),
                              ("extra_info", extra_info)])
        if self.target == "trl":
            # The source's other scalar columns stay top-level: GRPOTrainer passes each column to the reward as a
            # keyword, and trl_reward reads format_score (and extra_info) from there, as verl reads extra_info.
            return pa.schema([("prompt", MESSAGES), ("solution", gold_type), ("data_source", pa.string()),
                              ("id", pa.string()), *self.extra])
        if self.target == "openrlhf":
            return pa.schema([("input", pa.string()), ("label", pa.string()), ("data_source", pa.string()), ("id", pa.string())])
        if self.target == "sft":
            return pa.schema([("query", pa.string()), ("completion", pa.string()), ("id", pa.string())])
        return pa.schema([("text", pa.string()), ("id", pa.string())])

    def _prompt_text(self, row: dict, reward) -> str:
        question = row.get("question")
        if not isinstance(question, str) or not question.strip():
            raise RowRejected("empty question")
        prompt = row.get(self.prompt_column)
        if not isinstance(prompt, str) or not prompt.strip():
            raise RowRejected(f"empty {self.prompt_column}")
        # A built prompt keeps its own ending (TinyZero's ends in a newline before <think>); a question is stripped.
        prompt = prompt if self.prompt_column == "query" else prompt.strip()
        if self.instruction is None:
            if reward is None or reward.asked_in(prompt):
                return prompt
            return f"{prompt}\n\n{reward.instruction}"
        if not self.instruction or self.instruction.strip() in prompt:
            return prompt
        return f"{prompt}\n\n{self.instruction}"

    def _messages(self, text: str) -> list[dict]:
        system = [{"role": "system", "content": self.system}] if self.system else []
        return system + [{"role": "user", "content": text}]

    def convert(self, row: dict, split: str, index: int) -> dict:
        row_id = str(row.get("id") if row.get("id") is not None else f"{split}/{index}")
        if self.target in ("verl", "trl", "openrlhf"):
            data_source = row.get("data_source")
            if not data_source:
                raise RowRejected("no data_source")
            try:
                reward = get_reward(data_source)
            except UnknownRewardError:
                raise RowRejected(f"unknown data_source {data_source!r} (registered: {', '.join(sorted(REWARDS))})") from None
            gold = _gold(row, self.gold)
            if gold is None or (isinstance(gold, str) and not gold.strip()):
                raise RowRejected("no ground truth")
            prompt = self._prompt_text(row, reward)
            if self.target == "verl":
                extra = {f.name: row.get(f.name) for f in self.extra}
                return {
                    "data_source": reward.data_source,
                    "prompt": self._messages(prompt),
                    "ability": row.get("ability") or reward.ability,
                    "reward_model": {"style": "rule", "ground_truth": gold},
                    "extra_info": {"split": split, "index": index, "id": row_id, "question": row["question"],
                                   "answer": row.get("answer"), **extra},
                }
            if self.target == "trl":
                return {"prompt": self._messages(prompt), "solution": gold, "data_source": reward.data_source,
                        "id": row_id, **{f.name: row.get(f.name) for f in self.extra}}
            label = gold if isinstance(gold, str) else json.dumps(gold, ensure_ascii=False)
            return {"input": prompt, "label": label, "data_source": reward.data_source, "id": row_id}
        if self.target == "sft":
            completion = row.get(self.completion)
            if not isinstance(completion, str) or not completion.strip():
                raise RowRejected(f"empty {self.completion}")
            reward = REWARDS.get(row.get("data_source") or "")
            return {"query": self._prompt_text(row, reward), "completion": completion, "id": row_id}
        text = row.get("text")
        if not isinstance(text, str) or not text.strip():
            question, completion = row.get("question"), row.get(self.completion) if self.completion else None
            if not (isinstance(question, str) and question.strip() and isinstance(completion, str) and completion.strip()):
                raise RowRejected("no text and no question with a completion")
            text = f"{question.strip()}\n\n{completion.strip()}"
        return {"text": text, "id": row_id}


def run_export(
    dataset: str | Path,
    target: str,
    output: str | Path,
    instruction: str | None = None,
    system: str | None = None,
    batch_size: int = 4096,
    progress: bool = True,
) -> ExportResult:
    """Exports DATASET for `target` into OUTPUT (replacing an earlier export there). `instruction` is appended
    to every prompt (None: the row's reward's own instruction, "" for none); `system` adds a system message."""
    if target not in TARGETS:
        raise ExportError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
    files = input_files(Path(dataset))
    output = Path(output)
    if output.resolve() == Path(dataset).resolve():
        raise ExportError("the output must not be the dataset itself")
    # Every file's columns are checked before anything is written: a dataset that cannot be exported leaves no
    # empty data/ or rejects/ behind.
    exporters = [Exporter(target, pq.read_schema(path), instruction, system) for _, path in files]
    # Written beside the final folders and swapped in at the end (data, then rejects): a failure leaves the earlier
    # export (or nothing).
    with atomic_folder(output / "rejects") as rejects, atomic_folder(output / "data") as data:
        result = _export_files(files, exporters, target, output, {"data": data, "rejects": rejects}, batch_size,
                               progress)
    result.files = [output / "data" / f.name for f in result.files]
    _write_bookkeeping(result, Path(dataset), instruction, system)
    return result


def output_identity(dataset: str | Path, target: str, instruction: str | None, system: str | None) -> tuple[dict, list]:
    """What decides an export (or a launch kit made of exports): its parameters and the dataset's files, as the CLI
    and the flow claim the output folder with them."""
    parameters = {"dataset": str(Path(dataset).resolve()), "to": target, "instruction": instruction, "system": system}
    return parameters, folder_signature(dataset)


def _export_files(files, exporters, target, output, staged, batch_size, progress) -> ExportResult:
    result = ExportResult(output=output, target=target)
    total = sum(pq.ParquetFile(f).metadata.num_rows for _, f in files)
    split_index: Counter = Counter()
    split_files: Counter = Counter()  # shards are numbered within their split: train-00000 is the first train file
    with (open(staged["rejects"] / "export.jsonl", "w") as rejects,
          ProgressBar(f"export → {target}", total=total, enabled=progress, unit="row") as bar):
        for (split, path), exporter in zip(files, exporters, strict=True):
            source = pq.ParquetFile(path)
            destination = staged["data"] / f"{split}-{split_files[split]:05d}.parquet"
            split_files[split] += 1
            with pq.ParquetWriter(destination, exporter.schema) as writer:
                for batch in source.iter_batches(batch_size=batch_size):
                    rows = []
                    for row in batch.to_pylist():
                        index = split_index[split]
                        split_index[split] += 1
                        try:
                            rows.append(exporter.convert(row, split, index))
                        except RowRejected as reason:
                            result.rejected[str(reason).split(" (")[0]] += 1
                            rejects.write(json.dumps({"reason": str(reason), "source": str(path), "position": index,
                                                      "id": row.get("id"), "raw": row}, default=str, ensure_ascii=False) + "\n")
                    if rows:
                        writer.write_table(pa.Table.from_pylist(rows, schema=exporter.schema))
                    result.rows[split] += len(rows)
                    bar.advance(batch.num_rows)
            result.files.append(destination)
    return result


USAGE = {
    "verl": "data.train_files={train}  reward.custom_reward_function.path=pkg://curate.rewards.verl_reward  "
            "reward.custom_reward_function.name=compute_score",
    "trl": "GRPOTrainer(..., train_dataset=load_dataset('parquet', data_dir='{data}')['train'], "
           "reward_funcs=[curate.rewards.trl_reward()])",
    "openrlhf": "--prompt_data {data} --input_key input --label_key label --apply_chat_template",
    "sft": "SFT on query → completion",
    "cpt": "continued pretraining on `text`",
}


def _write_bookkeeping(result: ExportResult, dataset: Path, instruction: str | None, system: str | None) -> None:
    state = result.output / STATE
    state.mkdir(parents=True, exist_ok=True)
    record = {"dataset": str(dataset.resolve()), "target": result.target, "instruction": instruction, "system": system,
              "rows": dict(result.rows), "rejected": dict(result.rejected), "files": [f.name for f in result.files]}
    write_text_atomic(state / "export.json", json.dumps(record, indent=2))
    schema = pq.read_schema(result.files[0]) if result.files else None
    usage = USAGE[result.target].format(train=(result.output / "data" / "train-*.parquet"), data=result.output / "data")
    _write_card(result, dataset, schema, usage, instruction, system)


TASK_CATEGORIES = {"verl": ["reinforcement-learning", "text-generation"], "trl": ["reinforcement-learning", "text-generation"],
                   "openrlhf": ["reinforcement-learning", "text-generation"], "sft": ["text-generation"],
                   "cpt": ["text-generation"]}


FIELD_MEANINGS = {
    "data_source": "the registered reward in `curate.rewards` that grades the row",
    "prompt": "chat messages given to the policy",
    "ability": "task family",
    "reward_model": "`style` and `ground_truth` passed to the reward",
    "extra_info": "split, index, id, question, answer and the source's other scalar columns",
    "solution": "ground truth passed to the reward",
    "input": "prompt text",
    "label": "ground truth as text",
    "query": "prompt text",
    "completion": "target completion",
    "text": "document text",
    "id": "row id from the source dataset",
    "format_score": "score of a well-formed wrong answer, read by the Countdown reward",
}


def _write_card(result: ExportResult, dataset: Path, schema: pa.Schema | None, usage: str, instruction: str | None,
                system: str | None) -> None:
    """The family card; license and language are the source dataset's (its card says what the rows may be used for)."""
    from huggingface_hub import DatasetCard, DatasetCardData


    source = DatasetCard.load(dataset / "README.md").data if (dataset / "README.md").is_file() else None
    splits = sorted(result.rows)
    card_data = DatasetCardData(
        license=(source.license if source else None) or "other",
        language=(source.language if source else None) or ["en"],
        task_categories=TASK_CATEGORIES[result.target],
        size_categories=[size_category(sum(result.rows.values()))],
        pretty_name=f"{dataset.name}: {result.target} export",
        tags=list(dict.fromkeys(["curate", "export", result.target, *((source.tags or []) if source else [])])),
        configs=[{"config_name": "default", "data_files": [{"split": s, "path": f"data/{s}-*.parquet"} for s in splits]}],
    )
    rejected = "\n".join(f"| {k} | {v:,} |" for k, v in result.rejected.items()) or "| (none) | 0 |"
    rows = "\n".join(f"| {s} | {result.rows[s]:,} |" for s in splits)
    fields = [(f"`{f.name}`", f"`{f.type}`", FIELD_MEANINGS.get(f.name, "carried over from the source dataset"))
              for f in schema] if schema else []
    card = render_card(
        card_data,
        summary=f"{sum(result.rows.values()):,} rows of `{dataset.name}` in the input format of {result.target}.",
        method=f"Exported from `{dataset.resolve()}`; each row's `data_source` names the registered reward in "
               "`curate.rewards` that grades it.",
        parameters=[("dataset", dataset), ("target", result.target), ("instruction", instruction), ("system", system)],
        command=reproduce_command("export", dataset, options=[("--to", result.target), ("--output", result.output),
                                                              ("--instruction", instruction), ("--system", system)]),
        sections=[("Rows per split", f"| split | rows |\n|---|---|\n{rows}"),
                  ("Rejected rows", "Kept with their reason in `rejects/export.jsonl`.\n\n| reason | rows |\n|---|---|\n"
                   + rejected),
                  ("Use", f"`{usage}`")],
        fields=fields,
        load=load_snippet(splits),
        limitations="The rows are those of the source dataset, with its card's limitations; see its README.md.",
    )
    save_card(card, result.output)




def check_export(job: ExportJob) -> None:
    """An unknown target, a dataset without parquet files, or the dataset itself as the output fail here, before the
    output is claimed (the export flow checks its parameters so)."""
    if job.to not in TARGETS:
        raise ExportError(f"unknown target {job.to!r}; choose one of {', '.join(TARGETS)}")
    if Path(job.output).resolve() == Path(job.dataset).resolve():
        raise ExportError("the output must not be the dataset itself")
    input_files(Path(job.dataset))


def export(job: ExportJob, progress: bool = True, refresh: bool = False) -> ExportResult | None:
    """Runs `curate export` and the export flow: claims the output with the export's identity (None when it is up
    to date; `refresh`: export all the same, as a flow whose cached result is stale), then exports. A failed export
    into a new folder leaves nothing behind (nothing there is worth resuming)."""
    check_export(job)
    what, inputs = output_identity(job.dataset, job.to, job.instruction, job.system)
    return write_once(job.output, "export", what, lambda: run_export(
        job.dataset, job.to, job.output, instruction=job.instruction, system=job.system, progress=progress),
        inputs=inputs, overwrite=job.overwrite, abandon=True, refresh=refresh)
