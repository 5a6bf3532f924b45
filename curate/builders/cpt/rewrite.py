"""The LLM rewrite: each document of both sets (and, in later rounds, more of its pool) rewritten as
<question>/<thoughts>/<answer> through the model server; unparseable rewrites dropped, counted and kept in rejects
with the raw output; both rewritten sets then matched at the budget again (rematch_rewrites)."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from curate.builders.cpt.common import VARIANTS, CPTError, load_tokenizer, parse_token_count
from curate.builders.cpt.llm_jobs import (
    ChunkWriter,
    DocumentJobOptions,
    ask_about_document,
    content_fingerprint,
    run_document_job,
)
from curate.builders.cpt.matching import Candidate, match_pools
from curate.builders.jobs import CPTJob
from curate.classifiers.llm import read_prompt_files
from curate.files import atomic_open, atomic_path
from curate.pipelines.executor_options import ExecutorOptions
from curate.pipelines.llm.job import claim_job
from curate.pipelines.state import STATE

PROMPTS_DIR = Path(__file__).parents[1] / "prompts" / "rewrite_v1"


class RewriteParseError(ValueError):
    pass


@dataclass(frozen=True)
class RewritePrompts:
    system: str
    document: str
    instructions: dict[str, str]  # variant -> instructions
    version: str

    @classmethod
    def load(cls, directory: Path = PROMPTS_DIR) -> RewritePrompts:
        texts, version = read_prompt_files(directory)
        instructions = {v: texts[f"instructions_{v}"] for v in VARIANTS}
        return cls(texts["system"], texts["document"], instructions, version)

    def messages(self, document: str, variant: str) -> list[dict]:
        # Document first, instructions after: the same layout as llm_v1, so a prefix cache can reuse the document.
        user = f"{self.document.replace('{document}', document)}\n\n{self.instructions[variant]}"
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]


SECTIONS = ("question", "thoughts", "answer")
THINK_BLOCK = re.compile(r"<think>.*?</think>", re.IGNORECASE | re.DOTALL)
HEADING = re.compile(r"^\s*(?:#{1,4}\s*)?\**\s*(question|thoughts?|reasoning|answer|final answer)"
                     r"\s*\**\s*:?\s*\**\s*(.*)$", re.IGNORECASE)
HEADING_NAMES = {"question": "question", "thought": "thoughts", "thoughts": "thoughts", "reasoning": "thoughts",
                 "answer": "answer", "final answer": "answer"}


def _tagged(text: str, name: str, truncated: bool) -> str | None:
    opened = re.search(rf"<\s*{name}\s*>", text, re.IGNORECASE)
    if not opened:
        return None
    rest = text[opened.end():]
    closed = re.search(rf"<\s*/\s*{name}\s*>", rest, re.IGNORECASE)
    if closed:
        return rest[: closed.start()].strip()
    following = [m.start() for s in SECTIONS if s != name
                 for m in [re.search(rf"<\s*{s}\s*>", rest, re.IGNORECASE)] if m]
    if following:
        return rest[: min(following)].strip()
    # An unclosed last section is whole only when the model stopped by itself.
    return None if truncated else rest.strip()


def _headed(text: str) -> dict[str, str]:
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        match = HEADING.match(line)
        if match and HEADING_NAMES[match.group(1).lower()] not in sections:
            current = HEADING_NAMES[match.group(1).lower()]
            sections[current] = [match.group(2)] if match.group(2).strip() else []
        elif current:
            sections[current].append(line)
    return {k: "\n".join(v).strip().strip("*").strip() for k, v in sections.items()}


def parse_rewrite(output: str | None, finish_reason: str | None = "stop") -> dict[str, str]:
    """<question>/<thoughts>/<answer> from a model's rewrite; headed sections ('Question:', '**Answer:**') are read
    where the tags are missing. Raises RewriteParseError without a question or an answer; thoughts may be empty."""
    if not output or not output.strip():
        raise RewriteParseError("empty output")
    truncated = finish_reason == "length"
    text = THINK_BLOCK.sub("", output)
    found = {name: _tagged(text, name, truncated) for name in SECTIONS}
    if not (found["question"] and found["answer"]):
        headed = _headed(text)
        if headed.get("question") and headed.get("answer") and not truncated:
            found = {name: found[name] or headed.get(name) for name in SECTIONS}
    missing = [name for name in ("question", "answer") if not found[name]]
    if missing:
        suffix = " (the output was cut at the token limit)" if truncated else ""
        raise RewriteParseError(f"no {' and no '.join(missing)}{suffix}")
    return {name: found[name] or "" for name in SECTIONS}


def completion_text(thoughts: str, answer: str) -> str:
    return f"<think>\n{thoughts}\n</think>\n<answer>\n{answer}\n</answer>"


def cpt_text(question: str, thoughts: str, answer: str) -> str:
    return f"<question>\n{question}\n</question>\n<thoughts>\n{thoughts}\n</thoughts>\n<answer>\n{answer}\n</answer>"


@dataclass(frozen=True)
class RewriteOptions(DocumentJobOptions):
    """The rewrite's own budget."""

    max_new_tokens: int = 4096

    def context_tokens(self) -> int:
        """One request: the document, the prompt (under 1024 tokens) and an output as long as the document."""
        return self.max_doc_tokens + self.max_new_tokens + 1024


REWRITE_KEY = "curate_rewrite"
REWRITE_SCHEMA = pa.schema([
    ("id", pa.string()), ("variant", pa.string()), ("question", pa.string()), ("thoughts", pa.string()),
    ("answer", pa.string()), ("error", pa.string()), ("raw", pa.string()), ("finish_reason", pa.string()),
    ("truncated", pa.bool_()), ("prompt_tokens", pa.int64()), ("completion_tokens", pa.int64()),
])


async def rewrite_rollout(document, generate, prompts: RewritePrompts, truncator, max_new_tokens: int, bar) -> dict:
    """One document, one request; always a row: a failed request or an unreadable rewrite is an error, not a crash."""
    variant = document.metadata["variant"]
    result, truncated, failure = await ask_about_document(
        document, generate, truncator, lambda text: prompts.messages(text, variant), max_new_tokens)
    bar.advance()
    row = {"variant": variant, "question": None, "thoughts": None, "answer": None, "error": failure,
           "raw": None, "finish_reason": None, "truncated": truncated, "prompt_tokens": 0, "completion_tokens": 0}
    if result is None:
        return row
    row.update(raw=result.text, finish_reason=result.finish_reason,
               prompt_tokens=int(result.usage.get("prompt_tokens") or 0),
               completion_tokens=int(result.usage.get("completion_tokens") or 0))
    try:
        row.update(parse_rewrite(result.text, result.finish_reason))
    except RewriteParseError as error:
        row["error"] = f"parse: {error}"
    return row


@dataclass
class RewriteResult:
    kept: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, dict[str, int]] = field(default_factory=dict)  # variant -> reason -> rows
    tokens: dict[str, int] = field(default_factory=dict)
    prompt_version: str = ""
    seconds: float = 0.0
    # The two rewritten sets matched on tokens again: tokens before (every kept rewrite) and after, and why not
    tokens_before: dict[str, int] = field(default_factory=dict)
    rematched: bool = False
    rematch_note: str = ""
    rematch_ks: float | None = None
    budget: int | None = None  # the budget the rewritten sets are matched at (None: the smaller rewritten total)
    rounds: int = 0  # rewrite rounds run: the first rewrites the set and a margin, later ones what is still missing
    # variant -> documents rewritten, how many of them from the set (the rest: more of the same pool), source tokens
    sources: dict[str, dict[str, int]] = field(default_factory=dict)


def rematch_rewrites(output: Path, result: RewriteResult, tolerance: float, length_bins: int,
                     order: dict[str, list[str]] | None = None) -> None:
    """Matches OUT/enriched_rewrite and OUT/minimized_rewrite on tokens again (best-effort lengths) at
    `result.budget` where both sides' kept rewrites hold it, else at the smaller of the two rewritten totals: a
    rewrite changes each document's length, and not by the same factor on both sides. `order`: each side's rewrite
    sources in draw order (the set's documents first), default the order of OUT/<variant>. Rewrites left out are
    listed in <variant>_rewrite/rejects/rematch_surplus.jsonl; each data file is replaced whole."""
    tables = {v: pq.read_table(output / f"{v}_rewrite" / "data") for v in VARIANTS}
    result.tokens_before = {v: int(sum(t.column("n_tokens").to_pylist())) for v, t in tables.items()}
    smaller = min(result.tokens_before.values())
    if smaller == 0:
        result.rematch_note = "not re-matched: no rewrite was kept on one side"
        return
    budget = result.budget
    target = budget if budget is not None and smaller >= budget * (1 - tolerance / 2) else smaller
    # Rewrites in the order of their sources' draw, as the sets were: the re-match keeps the same sample.
    pools = {v: [Candidate(r["id"], r["n_tokens"], None) for r in t.select(["id", "n_tokens"]).to_pylist()]
             for v, t in tables.items()}
    for v in VARIANTS:
        ids = order[v] if order else pq.read_table(output / v / "data", columns=["id"]).column("id").to_pylist()
        position = {i: n for n, i in enumerate(ids)}
        pools[v].sort(key=lambda c: position.get(c.id, len(position)))
    try:
        ids_e, ids_m, report = match_pools(pools["enriched"], pools["minimized"], target, tolerance, length_bins,
                                           length_match="best")
    except CPTError as error:
        result.rematch_note = f"not re-matched: {error}"
        return
    for variant, ids in zip(VARIANTS, (ids_e, ids_m), strict=True):
        keep = set(ids)
        table = tables[variant]
        mask = pa.array([i in keep for i in table.column("id").to_pylist()])
        path = output / f"{variant}_rewrite" / "data" / "train-00000.parquet"
        surplus_path = output / f"{variant}_rewrite" / "rejects" / "rematch_surplus.jsonl"
        with atomic_open(surplus_path) as surplus, atomic_path(path) as staged:  # the data first, then its surplus
            pq.write_table(table.filter(mask), staged)
            left_out = table.filter(pc.invert(mask)).select(["id", "n_tokens"]).to_pylist()
            reason = "rematch_surplus: left out to match the other set's tokens"
            surplus.writelines(json.dumps({"reason": reason, **row}) + "\n" for row in left_out)
        result.kept[variant] = len(keep)
    result.tokens = {"enriched": report.enriched_tokens, "minimized": report.minimized_tokens}
    result.rematched, result.rematch_ks = True, report.ks_statistic
    if target == budget:
        result.rematch_note = f"re-matched at the budget, {target:,} tokens"
    else:
        short = min(VARIANTS, key=result.tokens_before.__getitem__)
        result.rematch_note = (f"re-matched at {target:,} tokens, the smaller rewritten total"
                               + (f": the {short} rewrites hold less than the budget {budget:,} after {result.rounds} "
                                  f"round(s) ({result.sources.get(short, {}).get('documents', 0):,} documents "
                                  "rewritten)"
                                  if budget is not None else ""))


# Rewrite rounds: the first rewrites each set and --rewrite-oversample more source tokens from its pool; each later
# round rewrites, from the rest of the pool, what the kept rewrites still lack at the rate observed so far.
REWRITE_ROUNDS = 4


def rewrite_sources(chosen: list[str], pool: list[Candidate], length_range: list[int] | None = None) -> list[Candidate]:
    """What a side may rewrite, in order: the set's documents (in draw order), then the rest of its pool in draw
    order (inside the common length range where the matching used one)."""
    ids = set(chosen)
    extra = [c for c in pool if c.id not in ids
             and (length_range is None or length_range[0] <= c.n_tokens <= length_range[1])]
    return [c for c in pool if c.id in ids] + extra


def _round_sources(sources: list[Candidate], taken: int, in_set: int, want_tokens: float) -> int:
    """How many of `sources` the next round takes in all: at least the set, then documents beyond it until they
    bring `want_tokens` more source tokens."""
    end, added = max(taken, in_set), 0
    while end < len(sources) and added < want_tokens:
        added += sources[end].n_tokens
        end += 1
    return end


def run_rewrite(job: CPTJob, options: RewriteOptions, pool_files: list[str], sources: dict[str, list[Candidate]],
                in_set: dict[str, int], progress: bool = True) -> RewriteResult:
    """Rewrites each side's `sources` (its set's `in_set` documents first, then more of its pool) into
    OUT/<variant>_rewrite, in rounds (REWRITE_ROUNDS at most), one model server per task, on the job's executor
    (Slurm: raises JobSubmitted; rerun once the job is done). Round 0 takes the set plus `--rewrite-oversample - 1`
    times the budget in source tokens; a later round runs while a side's kept rewrites hold less than the budget plus
    half that margin, taking the source tokens they lack divided by the rewritten-to-source token rate seen so far.
    Each round is one LLM job (OUT/.curate/rewrite/round-N): the same configuration resumes, another is refused
    unless the job's `overwrite`, which removes every round and rewrites again."""
    output, executor = Path(job.output), job.runs_on
    budget, oversample = parse_token_count(job.tokens), job.rewrite_oversample
    options.validate(executor.gpus_per_task)
    if oversample < 1:
        raise CPTError("--rewrite-oversample must be at least 1")
    prompts = RewritePrompts.load()
    # Absolute: Ray and Slurm workers need not share this process's working directory.
    root = output.resolve() / STATE / "rewrite"
    if job.overwrite:
        shutil.rmtree(root, ignore_errors=True)
    # The pool is written anew by every run: what it holds, not its file times, decides whether earlier rewrites
    # and checkpoints still apply.
    pool_print = content_fingerprint(pool_files)
    tokenizer = load_tokenizer(job.tokenizer)
    result = RewriteResult(prompt_version=prompts.version, budget=budget)
    taken = dict.fromkeys(VARIANTS, 0)
    goal, enough = budget * oversample, budget * (1 + (oversample - 1) / 2)
    started = time.perf_counter()
    files: list[str] = []
    for round_index in range(REWRITE_ROUNDS):
        ends = {}
        for v in VARIANTS:
            if round_index == 0:
                in_set_tokens = sum(c.n_tokens for c in sources[v][:in_set[v]])
                ends[v] = _round_sources(sources[v], 0, in_set[v], goal - in_set_tokens)
                continue
            kept, rewritten = result.tokens.get(v, 0), sum(c.n_tokens for c in sources[v][:taken[v]])
            if kept >= enough or kept == 0:  # enough, or no rate to go by: nothing kept (the card says so)
                ends[v] = taken[v]
                continue
            ends[v] = _round_sources(sources[v], taken[v], in_set[v], (goal - kept) * rewritten / kept)
        if round_index and all(ends[v] == taken[v] for v in VARIANTS):
            break
        ids = {v: [c.id for c in sources[v][taken[v]:ends[v]]] for v in VARIANTS}
        files += _rewrite_round(root / f"round-{round_index}", ids, pool_files, pool_print, options, prompts, executor,
                                progress)
        taken = ends
        result.rounds = round_index + 1
        for variant in VARIANTS:
            _write_rewrite(output / f"{variant}_rewrite", variant, files, tokenizer, options, prompts.version, result)
    result.seconds = time.perf_counter() - started
    result.sources = {v: {"documents": taken[v], "from_set": min(taken[v], in_set[v]),
                          "source_tokens": sum(c.n_tokens for c in sources[v][:taken[v]])} for v in VARIANTS}
    return result


def _rewrite_round(stage: Path, ids: dict[str, list[str]], pool_files: list[str], pool_print: list,
                   options: RewriteOptions, prompts: RewritePrompts, executor: ExecutorOptions,
                   progress: bool) -> list[str]:
    """One rewrite job over the pool documents `ids` (variant -> ids); returns its finished output files."""
    digest = hashlib.md5(json.dumps(ids, sort_keys=True).encode()).hexdigest()
    config = {**asdict(options), "prompt_version": prompts.version, "inputs": {"pool": pool_print, "ids": digest}}
    claim_job(stage / "config.json", config, "rewrites", "pass --overwrite to rewrite again", run=[stage])
    source = stage / "input" / "documents.parquet"
    if not source.exists():
        source.parent.mkdir(parents=True, exist_ok=True)
        chosen = pa.table({"id": [i for v in VARIANTS for i in ids[v]],
                           "variant": [v for v in VARIANTS for _ in ids[v]]})
        with duckdb.connect() as connection, atomic_path(source) as staged:
            connection.register("chosen", chosen)
            connection.execute(f"COPY (SELECT p.id, p.text, c.variant FROM read_parquet($f) p JOIN chosen c "
                               f"ON p.id = c.id AND p.pool = c.variant) TO '{staged}' (FORMAT parquet)",
                               {"f": pool_files})
    raw = stage / "raw"
    run_document_job(stage, source, options, executor, step="rewrite", rollout_fn=rewrite_rollout,
                     writer=ChunkWriter(str(raw), "📒 Rewrites", "rewrites", REWRITE_SCHEMA, REWRITE_KEY),
                     arguments={"prompts": prompts, "max_new_tokens": options.max_new_tokens}, progress=progress)
    return sorted(str(p) for p in raw.glob("rewrites_*.parquet"))


def _write_rewrite(destination: Path, variant: str, files: list[str], tokenizer, options: RewriteOptions,
                   prompt_version: str, result: RewriteResult) -> None:
    """OUT/<variant>_rewrite from the rewrite jobs' output `files`: the kept rewrites with their token counts in data/,
    the others with their reason and raw output in rejects/rewrite.jsonl; the counts go into `result`."""
    schema = pa.schema([("id", pa.string()), ("question", pa.string()), ("thoughts", pa.string()),
                        ("answer", pa.string()), ("completion", pa.string()), ("text", pa.string()),
                        ("n_tokens", pa.int64()), ("source_variant", pa.string()), ("model", pa.string()),
                        ("prompt_version", pa.string()), ("truncated_source", pa.bool_())])
    for folder in ("data", "rejects"):
        shutil.rmtree(destination / folder, ignore_errors=True)
        (destination / folder).mkdir(parents=True)
    data_path = destination / "data" / "train-00000.parquet"
    rejects_path = destination / "rejects" / "rewrite.jsonl"
    kept = tokens = 0
    dropped: dict[str, int] = {}
    with duckdb.connect() as connection:
        relation = connection.sql(
            "SELECT * FROM read_parquet($files) WHERE variant = $variant ORDER BY id",
            params={"files": files, "variant": variant}) if files else None
        reader = relation.to_arrow_reader(1024) if relation is not None else []
        with atomic_open(rejects_path) as rejects, atomic_path(data_path) as staged, \
                pq.ParquetWriter(staged, schema) as writer:  # renamed when closed: the data first, then its rejects
            for batch in reader:
                rows = batch.to_pylist()
                good = [r for r in rows if r["error"] is None]
                for r in rows:
                    if r["error"] is not None:
                        reason = r["error"].split(" (")[0]
                        dropped[reason.split(":")[0]] = dropped.get(reason.split(":")[0], 0) + 1
                        rejects.write(json.dumps({"reason": r["error"], "id": r["id"], "variant": variant,
                                                  "raw": r["raw"], "finish_reason": r["finish_reason"]},
                                                 ensure_ascii=False) + "\n")
                texts = [cpt_text(r["question"], r["thoughts"], r["answer"]) for r in good]
                counts = [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]] if texts else []
                table = pa.Table.from_pylist([
                    {"id": r["id"], "question": r["question"], "thoughts": r["thoughts"], "answer": r["answer"],
                     "completion": completion_text(r["thoughts"], r["answer"]), "text": text, "n_tokens": n,
                     "source_variant": variant, "model": options.model, "prompt_version": prompt_version,
                     "truncated_source": r["truncated"]}
                    for r, text, n in zip(good, texts, counts)], schema=schema)
                writer.write_table(table)
                kept += len(good)
                tokens += sum(counts)
    result.kept[variant], result.tokens[variant], result.dropped[variant] = kept, tokens, dropped
