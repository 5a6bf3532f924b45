"""--require-solution: every pool document judged (does it state a problem and work out its solution?) by the cue
rule or by the is_solution prompt through the model server; documents without both are rejected with their reason."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from curate.builders.cpt.common import CPTError
from curate.builders.cpt.llm_jobs import (
    ChunkWriter,
    DocumentJobOptions,
    ask_about_document,
    content_fingerprint,
    run_document_job,
)
from curate.classifiers.solution import (
    CUE_VERSION,
    JUDGES,
    SolutionJudgement,
    SolutionPrompt,
    judge_by_cues,
    parse_solution_answer,
)
from curate.files import atomic_open, atomic_path
from curate.pipelines.executor_options import LOCAL, ExecutorOptions
from curate.pipelines.llm.job import claim_job


@dataclass
class SolutionFilter:
    judge: str
    version: str
    kept: dict[str, int] = field(default_factory=dict)  # pool -> documents kept
    rejected_by: dict[str, dict[str, int]] = field(default_factory=dict)  # pool -> reason -> documents
    rejected: set[str] = field(default_factory=set)
    model: str | None = None  # the LLM judge's model

    def summary(self) -> dict:
        return {"judge": self.judge, "version": self.version, "model": self.model, "kept": self.kept,
                "rejected": self.rejected_by}


@dataclass(frozen=True)
class SolutionJudgeOptions(DocumentJobOptions):
    """--require-solution llm: the judge's own budget."""

    max_answer_tokens: int = 256  # room for a short reasoning before the JSON object

    def context_tokens(self) -> int:
        """One request: the document, the prompt (under 1024 tokens) and the answer."""
        return self.max_doc_tokens + self.max_answer_tokens + 1024


SOLUTION_KEY = "curate_solution"
SOLUTION_SCHEMA = pa.schema([
    ("id", pa.string()), ("pool", pa.string()), ("contain_problem", pa.bool_()), ("contain_solution", pa.bool_()),
    ("reason", pa.string()), ("raw", pa.string()), ("finish_reason", pa.string()), ("truncated", pa.bool_()),
])


async def solution_rollout(document, generate, prompt: SolutionPrompt, truncator, max_answer_tokens: int, bar) -> dict:
    """One document, one request, always one verdict row: a failed request or an unreadable answer is a verdict with
    an `error: ...` reason (the document is then rejected as unjudged), never a crash or a guess."""
    result, truncated, failure = await ask_about_document(document, generate, truncator, prompt.messages,
                                                          max_answer_tokens)
    bar.advance()
    row = {"pool": document.metadata["pool"], "contain_problem": None, "contain_solution": None,
           "reason": None if failure is None else f"error: {failure}", "raw": None, "finish_reason": None,
           "truncated": truncated}
    if result is None:
        return row
    judgement = parse_solution_answer(result.text)
    return {**row, "contain_problem": judgement.contain_problem, "contain_solution": judgement.contain_solution,
            "reason": judgement.reason, "raw": result.text, "finish_reason": result.finish_reason}


def run_solution_judge(pool_files: list[str], stage: Path, options: SolutionJudgeOptions,
                       executor: ExecutorOptions = LOCAL, progress: bool = True,
                       overwrite: bool = False) -> tuple[dict[str, dict], str]:
    """Asks the model the is_solution question about every pool document, on `executor` (Slurm: raises JobSubmitted;
    rerun once the job is done), into `stage`; returns {id: verdict row} and the prompt version. The job's
    configuration (server, budgets, prompt version, the pool's content) decides whether an earlier run in `stage`
    resumes or is refused (`overwrite` starts over), as for the rewrite."""
    options.validate(executor.gpus_per_task)
    prompt = SolutionPrompt.load()
    stage = stage.resolve()  # Ray and Slurm workers need not share this process's working directory
    source = stage / "input" / "documents.parquet"
    config = {**asdict(options), "prompt_version": prompt.version, "inputs": content_fingerprint(pool_files)}
    claim_job(stage / "config.json", config, "is_solution verdicts", "pass --overwrite to judge again",
              overwrite=overwrite, run=[stage])
    if not source.exists():
        source.parent.mkdir(parents=True, exist_ok=True)
        with duckdb.connect() as connection, atomic_path(source) as staged:
            connection.execute(f"COPY (SELECT id, text, pool FROM read_parquet($f)) TO '{staged}' (FORMAT parquet)",
                               {"f": pool_files})
    raw = stage / "raw"
    run_document_job(stage, source, options, executor, step="is_solution", rollout_fn=solution_rollout,
                     writer=ChunkWriter(str(raw), "📒 is_solution verdicts", "verdicts", SOLUTION_SCHEMA, SOLUTION_KEY),
                     arguments={"prompt": prompt, "max_answer_tokens": options.max_answer_tokens}, progress=progress)
    files = sorted(str(p) for p in raw.glob("verdicts_*.parquet"))
    rows = pq.read_table(files, schema=SOLUTION_SCHEMA).to_pylist() if files else []
    return {r["id"]: r for r in rows}, prompt.version


def filter_solutions(pool_files: list[str], judge: str, rejects_path: Path, verdicts: dict[str, dict] | None = None,
                     version: str = CUE_VERSION, model: str | None = None, batch_size: int = 1024) -> SolutionFilter:
    """--require-solution: every pool document judged (problem and worked solution?), by the cue rule or from the
    LLM judge's `verdicts`; one reject line per document without both, with its reason (`no_problem`, `no_solution`,
    or `error: ...` for an answer that could not be read, with the raw answer) and the judge's version."""
    if judge not in JUDGES:
        raise CPTError(f"--solution-judge must be one of {', '.join(JUDGES)}, not {judge!r}")
    result = SolutionFilter(judge=judge, version=version, model=model)
    rejects_path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(rejects_path) as rejects:
        for path in pool_files:
            for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_size, columns=["id", "pool", "text"]):
                for row in batch.to_pylist():
                    raw = None
                    if verdicts is None:
                        judgement = judge_by_cues(row["text"])
                    elif row["id"] in verdicts:
                        verdict = verdicts[row["id"]]
                        judgement = SolutionJudgement(verdict["contain_problem"], verdict["contain_solution"],
                                                      verdict["reason"])
                        raw = verdict["raw"]
                    else:  # only when the judge's output lost a row: rejected, and said so
                        judgement = SolutionJudgement(None, None, "error: no verdict from the judge")
                    if judgement.kept:
                        result.kept[row["pool"]] = result.kept.get(row["pool"], 0) + 1
                        continue
                    reasons = result.rejected_by.setdefault(row["pool"], {})
                    key = judgement.reason.split(":")[0]  # error: ... counted as `error`; the line keeps it whole
                    reasons[key] = reasons.get(key, 0) + 1
                    result.rejected.add(row["id"])
                    rejects.write(json.dumps({
                        "reason": f"{judgement.reason}: judged by {result.version}", "id": row["id"],
                        "pool": row["pool"],
                        "contain_problem": judgement.contain_problem, "contain_solution": judgement.contain_solution,
                        **({"model": model, "raw": raw} if verdicts is not None else {}),
                    }, ensure_ascii=False) + "\n")
    return result
