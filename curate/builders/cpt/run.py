"""`curate cpt` and the cpt flow: the job's options checked (cpt_options), the output claimed (cpt), and the build
(run_cpt): the pools, the solution filter, the matching, both sets with their cards, the rewrite and the exports."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa

from curate.behaviors import UnknownBehaviorError, parse_behavior_list
from curate.builders.cpt.card import cpt_command, write_cpt_card, write_rewrite_card
from curate.builders.cpt.common import VARIANTS, CPTError, load_tokenizer, parse_token_count
from curate.builders.cpt.judge import SolutionFilter, SolutionJudgeOptions, filter_solutions, run_solution_judge
from curate.builders.cpt.matching import Candidate, MatchReport, length_match_mode, length_removed, match_pools
from curate.builders.cpt.packing import export_dataset
from curate.builders.cpt.pool import build_pool
from curate.builders.cpt.rewrite import RewriteOptions, RewriteResult, rematch_rewrites, rewrite_sources, run_rewrite
from curate.builders.cpt.selection import CPTSelection, tag_files
from curate.builders.jobs import CPTJob
from curate.classifiers.solution import JUDGES
from curate.files import atomic_path, write_text_atomic
from curate.pipelines.query import count_rejects, parquet_files
from curate.pipelines.state import STATE, folder_signature, write_once
from curate.pipelines.tag import file_fingerprints


@dataclass
class CPTResult:
    output: Path
    report: MatchReport
    pools: dict
    rewrite: RewriteResult | None = None
    exports: dict = field(default_factory=dict)
    rejects: dict = field(default_factory=dict)


def cpt_options(job: CPTJob) -> tuple[CPTSelection, RewriteOptions | None, SolutionJudgeOptions | None]:
    """The job's selection and the options of its LLM jobs (the rewrite, the solution judge), each option checked:
    a wrong one fails here, in one line, before the output is claimed (the cpt flow checks its parameters with it)."""
    chosen = parse_behavior_list(job.behaviors)
    if not chosen:
        raise UnknownBehaviorError("--behaviors is empty")
    selection = CPTSelection(behaviors=chosen, min_behaviors=job.min_behaviors, min_count=job.min_count, seed=job.seed)
    parse_token_count(job.tokens)
    length_match_mode(job.length_match)
    if job.pack_format not in ("parquet", "memmap"):
        raise CPTError(f"--pack-format must be parquet or memmap, not {job.pack_format!r}")
    if job.rewrite and not job.model:
        raise CPTError("--rewrite needs --model")
    server = job.llm
    rewrite = RewriteOptions(**server, max_new_tokens=job.max_new_tokens) if job.rewrite else None
    if job.solution_judge not in JUDGES:
        raise CPTError(f"--solution-judge must be cues or llm, not {job.solution_judge!r}")
    judge_llm = job.require_solution and job.solution_judge == "llm"
    if judge_llm and not job.model:
        raise CPTError("--solution-judge llm needs --model")
    judge = SolutionJudgeOptions(**server) if judge_llm else None
    if job.gpus_per_task and not (job.rewrite or judge_llm):
        raise CPTError("--gpus-per-task applies to --rewrite and --solution-judge llm only")
    if job.executor.gpus_per_task not in (0, job.gpus_per_task):
        raise CPTError("the GPUs per task are the job's gpus_per_task (the LLM jobs' servers), not the executor's")
    tag_files(job.tags)  # a folder without attribute shards
    return selection, rewrite, judge


def run_cpt(job: CPTJob, rewrite: RewriteOptions | None = None, solution_judge: SolutionJudgeOptions | None = None,
            progress: bool = True) -> CPTResult:
    """Builds both sets of `job` (checked by cpt_options) into job.output, claimed or not. `rewrite` and
    `solution_judge`: the options of the LLM jobs the job asks for, where a caller sets more than the job's flags
    hold (a device, the judge's answer budget); by default those cpt_options makes of the job. On Slurm the corpus
    pass (and, with --rewrite, the rewrite) is submitted and JobSubmitted is raised; the same call once the job is
    done continues from the finished job."""
    selection, job_rewrite, job_judge = cpt_options(job)
    if rewrite is not None and job_rewrite is None:
        raise CPTError("rewrite options apply to --rewrite only")
    if solution_judge is not None and job_judge is None:
        raise CPTError("judge server options apply to --require-solution --solution-judge llm only")
    rewrite, solution_judge = rewrite or job_rewrite, solution_judge or job_judge
    budget = parse_token_count(job.tokens)
    output = Path(job.output)
    load_tokenizer(job.tokenizer)  # a wrong path fails here, not inside a worker
    if job.oversample < 1:
        raise CPTError("--oversample must be at least 1")
    length_match = length_match_mode(job.length_match)
    if not 0 <= job.length_trim < 0.5:
        raise CPTError("--length-trim must be at least 0 and below 0.5")
    state = output / STATE
    state.mkdir(parents=True, exist_ok=True)
    for old in [*(output / v for v in VARIANTS), output / "rejects", output / "exports"]:
        shutil.rmtree(old, ignore_errors=True)

    pool, pools = build_pool(job, selection, budget, job.length_trim if length_match in ("strict", "range") else None,
                             progress)
    pool_files = parquet_files(pool / "data")
    with duckdb.connect() as connection:
        rows = connection.sql("SELECT id, pool, n_tokens, domain FROM read_parquet($f) ORDER BY draw",
                              params={"f": pool_files}).fetchall()
    solutions = _judge_solutions(job, pool_files, solution_judge, progress)
    if solutions is not None:
        rows = [r for r in rows if r[0] not in solutions.rejected]
    candidates = {v: [Candidate(i, n, d) for i, p, n, d in rows if p == v] for v in VARIANTS}
    try:
        ids_e, ids_m, report = match_pools(candidates["enriched"], candidates["minimized"], budget, job.tolerance,
                                           job.length_bins, length_match=length_match, length_trim=0.0,
                                           removed_before=pools.get("length_removed_chars"))
    except CPTError as error:
        if solutions is None:
            raise
        rejected = {v: sum(solutions.rejected_by.get(v, {}).values()) for v in VARIANTS}
        kept = {v: solutions.kept.get(v, 0) for v in VARIANTS}
        raise CPTError(f"{error} (after --require-solution by {solutions.version}: enriched {kept['enriched']:,} "
                       f"kept / {rejected['enriched']:,} rejected, minimized {kept['minimized']:,} kept / "
                       f"{rejected['minimized']:,} rejected; reasons in "
                       f"{output / 'rejects' / 'require_solution.jsonl'})") from None
    if set(ids_e) & set(ids_m):
        # Excluded by construction; never write such a pair.
        raise AssertionError("a document was selected into both sets")

    parameters = _parameters(job, selection, budget, pools, report, solutions, rewrite is not None)
    parameters["command"] = cpt_command(parameters, job.corpus, output, rewrite, solution_judge)
    parameters["matched_tokens"] = {"enriched": report.enriched_tokens, "minimized": report.minimized_tokens}
    _write_sets(output, pool_files, {"enriched": ids_e, "minimized": ids_m})
    rejects = count_rejects(output / "rejects")
    for variant in VARIANTS:
        write_cpt_card(output / variant, variant, parameters, report, Path(job.tags), rejects)
    result = CPTResult(output=output, report=report, pools=pools, rejects=rejects)

    datasets = list(VARIANTS)
    if rewrite is not None:
        # Rewrites change lengths, not by the same factor on both sides: each side rewrites its set plus more of its
        # pool, so that both rewritten sets can be matched at the budget again.
        sources = {v: rewrite_sources(ids, candidates[v], report.length_range)
                   for v, ids in zip(VARIANTS, (ids_e, ids_m), strict=True)}
        result.rewrite = run_rewrite(job, rewrite, pool_files, sources,
                                     {"enriched": len(ids_e), "minimized": len(ids_m)}, progress)
        rematch_rewrites(output, result.rewrite, job.tolerance, job.length_bins,
                         order={v: [c.id for c in sources[v]] for v in VARIANTS})
        for variant in VARIANTS:
            write_rewrite_card(output / f"{variant}_rewrite", variant, result.rewrite, rewrite, parameters)
        datasets += [f"{v}_rewrite" for v in VARIANTS]
    if job.export:
        for name in datasets:
            if parquet_files(output / name / "data"):
                result.exports[name] = export_dataset(output / name, output / "exports" / name, job.tokenizer,
                                                      job.pack_length, job.pack_format, progress)
    summary = {"parameters": parameters, "match": asdict(report), "rejects": rejects, "exports": result.exports,
               "rewrite": asdict(result.rewrite) if result.rewrite else None}
    write_text_atomic(state / "cpt.json", json.dumps(summary, indent=2, default=str))
    return result


def _judge_solutions(job: CPTJob, pool_files: list[str], solution_judge: SolutionJudgeOptions | None,
                     progress: bool) -> SolutionFilter | None:
    """--require-solution: every pool document judged by the job's judge (the LLM judge on `solution_judge`), one
    reject line per document without a problem and its worked solution; None without --require-solution."""
    if not job.require_solution:
        return None
    rejects = Path(job.output) / "rejects" / "require_solution.jsonl"
    if job.solution_judge != "llm":
        return filter_solutions(pool_files, job.solution_judge, rejects)
    verdicts, version = run_solution_judge(pool_files, Path(job.output) / STATE / "solution", solution_judge,
                                           job.runs_on, progress=progress, overwrite=job.overwrite)
    return filter_solutions(pool_files, "llm", rejects, verdicts, version, solution_judge.model)


def _parameters(job: CPTJob, selection: CPTSelection, budget: int, pools: dict, report: MatchReport,
                solutions: SolutionFilter | None, rewritten: bool) -> dict:
    """What the cards and OUT/.curate/cpt.json record of the build (its command is added from these)."""
    spec, cleaning = job.corpus, job.cleaning
    return {
        "tags": str(Path(job.tags).resolve()), "classifier": pools["classifier"], "texts": spec.path,
        "text_key": spec.text_key, "tokenizer": job.tokenizer, "selection": selection.describe(), "budget": budget,
        "tolerance": job.tolerance, "length_bins": job.length_bins, "domain_key": job.domain_key,
        "domain_column": pools["domain_column"], "oversample": job.oversample,
        "length_match": length_match_mode(job.length_match), "length_trim": job.length_trim,
        "length_removed": length_removed(pools, report), "dedup": cleaning.dedup, "decontam": cleaning.decontam,
        "benchmarks_dir": str(cleaning.benchmarks_dir) if cleaning.benchmarks_dir else None, "pools": pools,
        "license": job.license, "pack_length": job.pack_length, "pack_format": job.pack_format,
        "require_solution": job.solution_judge if job.require_solution else None,
        "rewrite_oversample": job.rewrite_oversample if rewritten else None,
        "solutions": solutions.summary() if solutions else None,
    }


def _write_sets(output: Path, pool_files: list[str], chosen: dict[str, list[str]]) -> None:
    """OUT/<variant>/data/train-00000.parquet: each set's chosen pool rows, in draw order."""
    with duckdb.connect() as connection:
        for variant, ids in chosen.items():
            destination = output / variant / "data" / "train-00000.parquet"
            destination.parent.mkdir(parents=True)
            connection.register("chosen", pa.table({"id": ids}))
            with atomic_path(destination) as staged:
                connection.execute(
                    f"COPY (SELECT p.* EXCLUDE (pool, draw), NULL::VARCHAR AS error FROM read_parquet($f) p "
                    f"JOIN chosen USING (id) ORDER BY p.draw) TO '{staged}' (FORMAT parquet)", {"f": pool_files})
            connection.unregister("chosen")


def cpt(job: CPTJob, progress: bool = True, refresh: bool = False) -> CPTResult | None:
    """Runs `curate cpt` and the cpt flow: claims the output for `job.record()` and the tags and corpus files (a
    folder holding another dataset is refused unless `job.overwrite`), then builds both sets. None when the output is
    up to date; `refresh` builds it all the same (a flow whose cached result is stale). An unfinished run (a Slurm
    stage submitted, an interrupt) keeps its claim: the same job continues it."""
    cpt_options(job)  # a wrong option fails before the output is claimed
    inputs = {"tags": folder_signature(job.tags), "texts": file_fingerprints(job.corpus)}
    return write_once(job.output, "cpt", job.record(), lambda: run_cpt(job, progress=progress),
                      inputs=inputs, overwrite=job.overwrite, refresh=refresh)
