"""Commands that hand datasets to trainers: export, reward-path, audit-verifier, filter-passrate,
audit-policy, handoff, publish."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from curate.cli.app import app, console
from curate.cli.groups import job_command, server_group
from curate.cli.options import (
    OverwriteOption,
    SystemOption,
    fail,
    sampling_config,
    summary,
    up_to_date,
    write_once,
)
from curate.handoff.jobs import ExportJob, PassRateJob

if TYPE_CHECKING:  # imported when a command runs: both import datatrove
    from curate.handoff.passrate import SamplingOptions
    from curate.pipelines.llm.server import ServerOptions


def export_once(command: str, run, dataset: Path, target: str, output: Path, instruction: str | None,
                system: str | None, overwrite: bool):
    """export and handoff: `run(dataset, target, output, ...)` writes a dataset for a trainer into OUTPUT, claimed
    with the export's identity (the dataset's files, the target, the prompt options). None when it is up to date; a
    failed write into a new folder leaves nothing behind (nothing there is worth resuming)."""
    from curate.handoff.export import output_identity

    what, inputs = output_identity(dataset, target, instruction, system)
    write = partial(run, dataset, target, output, instruction=instruction, system=system)
    return write_once(output, command, what, write, inputs=inputs, overwrite=overwrite, abandon=True)


@app.command()
def publish(
    directory: Annotated[Path, typer.Argument(help="A built dataset: data files + README.md card.")],
    repo_id: Annotated[str, typer.Option("--repo-id", help="Dataset repo on the Hub, ORG/NAME.")],
    private: Annotated[bool, typer.Option(help="Create the repo private (an existing repo keeps its visibility).")] = False,
    dry_run: Annotated[bool, typer.Option(help="Validate and list what would be uploaded; upload nothing.")] = False,
    include_rejects: Annotated[bool, typer.Option(help="Upload rejects/ (records dropped, with reasons) too.")] = True,
    endpoint: Annotated[str | None, typer.Option(help="Hub endpoint (default: HF_ENDPOINT or huggingface.co).")] = None,
    message: Annotated[str | None, typer.Option(help="Commit message.")] = None,
) -> None:
    """Check a dataset (loads with `datasets`; card metadata license, task_categories, size_categories,
    configs) and push it to the Hugging Face Hub as one commit. The token comes from HF_TOKEN and is never printed.

    Examples:

        curate publish datasets/backtracking --repo-id my-org/backtracking --dry-run

        HF_TOKEN=hf_... curate publish datasets/backtracking --repo-id my-org/backtracking --private
    """
    from curate.handoff.publish import InvalidDatasetError, UploadError
    from curate.handoff.publish import publish as run_publish

    try:
        result = run_publish(directory, repo_id, private=private, dry_run=dry_run, include_rejects=include_rejects,
                             endpoint=endpoint, commit_message=message)
    except (InvalidDatasetError, ValueError) as error:
        fail(str(error))
    except UploadError as error:
        console.print(f"[bold red]upload failed:[/] {error}")
        raise typer.Exit(1)
    plan = result.plan
    if dry_run:
        table = Table(title=f"Would upload to {repo_id} ({'private' if private else 'public'})", title_justify="left")
        table.add_column("path in repo")
        table.add_column("bytes", justify="right")
        for f in plan.files:
            table.add_row(f.path_in_repo, f"{f.size:,}")
        console.print(table)
    rows = [("repo", repo_id), ("files", f"{len(plan.files):,}"), ("bytes", f"{plan.total_bytes:,}")]
    rows += [(f"rows {config}/{split}", f"{n:,}") for config, splits in plan.rows.items() for split, n in splits.items()]
    if result.commit_url:
        rows += [("commit", result.commit_url)] + [("deleted stale", p) for p in result.deleted]
    summary("Dry run: nothing uploaded" if dry_run else f"Published {directory}", rows)


@app.command("export")
@job_command(ExportJob)
def export_dataset(job: ExportJob) -> None:
    """Export a built dataset for a trainer: verl, TRL (GRPO), OpenRLHF, SFT {query, completion} or CPT text.

    Examples:

        curate export datasets/countdown --to verl --output exports/countdown-verl

        curate export datasets/priming --to sft --output exports/priming-sft
    """
    from curate.handoff.export import export

    result = export(job)
    if result is None:
        up_to_date(job.output)
        return
    rows = [(f"rows ({split})", f"{n:,}") for split, n in sorted(result.rows.items())]
    rows += [(f"rejected: {reason}", f"{n:,}") for reason, n in result.rejected.items()]
    rows += [("data", str(job.output / "data")), ("rejects", str(job.output / "rejects" / "export.jsonl"))]
    summary(f"Exported {job.dataset} → {job.to}", rows)


@app.command("reward-path")
def reward_path() -> None:
    """Print the reward module verl loads (`custom_reward_function.path`; name: `compute_score`) and the rewards.

    Example:

        python -m verl.trainer.main_ppo custom_reward_function.path=$(curate reward-path) ...
    """
    from curate.rewards import REWARD_PATH, REWARDS

    for name, reward in sorted(REWARDS.items()):
        console.print(f"[bold]{name}[/]: {reward.description}")
    print(REWARD_PATH)


@app.command("audit-verifier")
@server_group(config=sampling_config, model="policy", sampling=True, judge=True, also=("k",))
def audit_verifier(
    pairs: Annotated[list[Path] | None, typer.Option(help="Labeled pairs, jsonl or parquet (repeatable): the hand-built "
                     "{id, gold, candidate, equivalent} file, GSM8K example_model_solutions.jsonl, Sky-T1 traces, a "
                     "PRM800K stepwise-critic parquet, or any table (see --pairs-format).")] = None,
    pairs_format: Annotated[str, typer.Option(help="auto | pairs | table | gsm8k | skythought | prm800k.")] = "auto",
    response_key: Annotated[str, typer.Option(help="table: the column holding the model response.")] = "response",
    gold_key: Annotated[str, typer.Option(help="table: the column holding the gold answer.")] = "gold",
    label_key: Annotated[str, typer.Option(help="table: the reference correctness label (true/false, 1/0).")] = "label",
    id_key: Annotated[str | None, typer.Option(help="table: the id column (default: FILE/LINE).")] = None,
    group_key: Annotated[str | None, typer.Option(help="table: responses to one problem share it; the bootstrap "
                         "resamples groups.")] = None,
    reward: Annotated[list[str] | None, typer.Option(help="Registered reward (data_source or short name); repeat to "
                      "compare several side by side (math, mathverify-plain, boxed-exact, last-number).")] = None,
    by_behavior: Annotated[str | None, typer.Option("--by-behavior", help="Classifier that tags each response "
                           "(cues, llm, distilled:DIR, a versioned name): precision/recall with and without each "
                           "behavior.")] = None,
    report: Annotated[Path | None, typer.Option(help="Write every figure as JSON (by_behavior, by_length, per reward).")] = None,
    plot: Annotated[Path | None, typer.Option(help="Recall with/without per behavior and by length quartile, PNG "
                    "(default: next to --report).")] = None,
    bootstrap: Annotated[int, typer.Option(help="Bootstrap resamples for the 95 % intervals.", min=100)] = 2000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
    verdicts: Annotated[Path | None, typer.Option(help="Write each pair's verdict (id, verdict true/false/null).")] = None,
    threads: Annotated[int, typer.Option(help="Pairs scored at the same time.", min=1)] = 4,
    show: Annotated[int, typer.Option(help="Slowest cases and wrong verdicts to list.", min=0)] = 10,
    policy: Annotated[str | None, typer.Option(help="On-policy: sample this model (hub name or local directory) on "
                      "--problems and audit the rewards on its own responses, instead of --pairs.")] = None,
    problems: Annotated[Path | None, typer.Option(help="On-policy: a built dataset (question, answer, data_source) or "
                        "a jsonl/parquet file with question and answer columns.")] = None,
    k: Annotated[int, typer.Option(help="On-policy: responses per problem.", min=1)] = 8,
    n: Annotated[int, typer.Option(help="On-policy: at most this many problems (-1: all).", min=-1)] = -1,
    question_key: Annotated[str, typer.Option(help="On-policy, jsonl/parquet problems: the question column.")] = "question",
    answer_key: Annotated[str, typer.Option(help="On-policy, jsonl/parquet problems: the gold answer column.")] = "answer",
    data_source: Annotated[str, typer.Option(help="On-policy, jsonl/parquet problems: the reward whose answer-format "
                           "instruction the prompt gets.")] = "curate/math",
    judge_max_tokens: Annotated[int, typer.Option(help="On-policy, with --judge-model: the LLM judge's answer "
                                                  "budget.", min=1)] = 512,
    label: Annotated[str, typer.Option(help="On-policy reference label: strict (last \\boxed{} by math-verify), llm "
                     "(the judge), agree (only responses both label alike).")] = "strict",
    output: Annotated[Path, typer.Option("--output", "-o", help="On-policy: samples, verdicts and report (a rerun "
                      "reuses them).")] = Path("verifier-audit"),
    overwrite: Annotated[bool, typer.Option("--overwrite", help="On-policy: --output holds samples or LLM verdicts "
                                            "made with other settings: remove them, then sample and judge again.")] = False,
    *,
    server: SamplingOptions,
    judge: ServerOptions | None,
) -> None:
    """Measure rewards' precision and recall on labeled pairs, overall, per answer type, by response length and,
    with --by-behavior, with and without each behavior (bootstrap 95 % intervals); warn when recall < 0.95.

    Examples:

        curate audit-verifier --pairs tests/verifier_pairs/pairs.jsonl

        curate audit-verifier --pairs ../shared/data/gsm8k/example_model_solutions.jsonl --by-behavior cues \\
            --reward math --reward last-number --report audits/gsm8k.json

        curate audit-verifier --pairs ../shared/data/longcot_skythought/sky-t1-math-correct-5K-27B_math500.jsonl \\
            --by-behavior cues --reward math --reward mathverify-plain --reward boxed-exact --report audits/sky.json

        curate audit-verifier --pairs mine.parquet --pairs-format table --response-key output --gold-key answer \\
            --label-key correct --group-key problem_id --reward curate/multihop --verdicts verdicts.jsonl

    On-policy: the policy's own k responses per problem, labeled by the strict judge (and an LLM judge with
    --judge-model), tagged with --by-behavior (default cues), same tables and --report layout. The judge runs on
    the policy's server settings (--backend, --device, --tp, ...) unless --judge-backend / --judge-endpoint-url
    name its own:

        curate audit-verifier --policy Qwen/Qwen2.5-1.5B-Instruct --problems datasets/multihop --k 8 --n 200 \\
            --reward math --reward mathverify-plain --backend vllm -o audits/onpolicy

        curate audit-verifier --policy Qwen/Qwen2.5-1.5B-Instruct --problems datasets/multihop --backend vllm \\
            --judge-model gpt-4o-mini --judge-backend endpoint --judge-endpoint-url https://api.openai.com/v1 -o audits/op
    """
    import json

    from curate.handoff.behavior_audit import plot_report, run_stratified_audit, write_report
    from curate.handoff.pair_sources import Columns, read_pair_source
    from curate.handoff.verifier_audit import RECALL_FLOOR, write_verdicts
    from curate.rewards import get_reward

    if bool(pairs) == bool(policy):
        fail("give --pairs FILE (jsonl or parquet; repeat for several files), or --policy MODEL --problems DATASET "
             "for the policy's own responses")
    if policy and not problems:
        fail("--policy needs --problems: a built dataset or a jsonl/parquet file with question and answer columns")
    rewards = [get_reward(r).data_source for r in reward or ["math"]]
    by_behavior = by_behavior or ("cues" if policy else None)
    if by_behavior:
        from curate.classifiers import get_classifier

        get_classifier(by_behavior)  # an unknown classifier fails now, with the list
    if policy:
        from curate.errors import CurateError
        from curate.handoff.onpolicy_audit import ProblemColumns, judge_options, run_onpolicy_audit

        try:
            onpolicy = run_onpolicy_audit(problems, output, server, rewards, by_behavior, limit=n,
                                          columns=ProblemColumns(question_key, answer_key, id_key), data_source=data_source,
                                          judge=judge_options(server, judge, judge_max_tokens) if judge else None,
                                          label=label, resamples=bootstrap,
                                          seed=seed, threads=threads, overwrite=overwrite)
        except CurateError as error:
            fail(str(error))
        figures, results, rejects = onpolicy.report, onpolicy.results, onpolicy.labeled.rejects
        n_pairs, label_source = len(onpolicy.labeled.pairs), figures["label_source"]
        reference = figures["reference"]
        console.print(f"{figures['samples']:,} responses of {policy} on {figures['problems']:,} problems (k={k}"
                      f"{', reused from ' + str(output / 'responses.jsonl') if onpolicy.labeled.reused_samples else ''}); "
                      f"strict judge: {reference['strict']['correct']:,} correct, {reference['strict']['incorrect']:,} "
                      f"incorrect, {reference['strict']['undecided']:,} undecided"
                      + (f"; LLM judge agrees on {reference['agreement']['agree']:,} of "
                         f"{reference['agreement']['both_decided']:,}" if "agreement" in reference else ""))
        for reason, count in figures["rejected_reasons"].items():
            console.print(f"[yellow]left out: {count:,} responses ({reason})[/]")
        report = report or output / "report.json"
    else:
        pair_set = read_pair_source(pairs, pairs_format, Columns(response_key, gold_key, label_key, id_key, group_key))
        for reject in pair_set.rejects[:show]:
            console.print(f"[yellow]skipped {reject.get('source', '')}:{reject.get('line', '')}: {reject['reason']}[/]")
        if len(pair_set.rejects) > show:
            console.print(f"[yellow]… {len(pair_set.rejects) - show:,} more rejected rows[/]")
        if not pair_set.pairs:
            fail(f"no valid pairs in {', '.join(map(str, pairs))}")
        source = {"format": pair_set.format, "label_source": pair_set.label_source, "paths": pair_set.paths,
                  "rejected": len(pair_set.rejects)}
        audit = run_stratified_audit(pair_set.pairs, rewards, by_behavior, bootstrap, seed, threads, source)
        figures, results, rejects = audit.report, audit.results, pair_set.rejects
        n_pairs, label_source = len(pair_set.pairs), pair_set.label_source

    def pct(value):
        return "-" if value is None else f"{100 * value:.1f} %"

    def cell(m):
        if m["recall"] is None:
            return "-"
        ci = "" if m["ci_low"] is None else f" [{100 * m['ci_low']:.0f}–{100 * m['ci_high']:.0f}]"
        precision = "-" if m["precision"] is None else f"{100 * m['precision']:.0f}"
        return f"{100 * m['recall']:.1f}{ci} P {precision}"

    first = results[rewards[0]]
    table = Table(title=f"{first.reward} on {n_pairs:,} pairs by answer type ({first.seconds:.1f} s)")
    for column in ["answer type", "pairs", "precision", "recall", "accuracy", "undecided"]:
        table.add_column(column, justify="left" if column == "answer type" else "right")
    for kind, m in [*first.by_type.items(), ("ALL", first.overall)]:
        table.add_row(kind, f"{m.pairs:,}", pct(m.precision), pct(m.recall), pct(m.accuracy), f"{m.undecided:,}")
    console.print(table)

    side = Table(title=f"recall [95 % CI] and precision per stratum ({label_source}"
                       f"{', ' + figures['classifier'] if figures['classifier'] else ''})", title_justify="left")
    side.add_column("stratum")
    side.add_column("pairs (correct)", justify="right")
    for name in rewards:
        side.add_column(name, justify="right")
    per = figures["rewards"]

    def row(label, pick, marks=None):
        m0 = pick(per[rewards[0]])
        side.add_row(label, f"{m0['n']:,} ({m0['tp'] + m0['fn']:,})",
                     *[cell(pick(per[r])) + (marks(per[r]) if marks else "") for r in rewards])

    row("ALL", lambda f: f["overall"])
    if by_behavior:
        for b in figures["by_behavior"]:
            star = lambda f, b=b: " *" if f["by_behavior"][b]["difference"]["recall"]["excludes_zero"] else ""
            row(f"{b}: with", lambda f, b=b: f["by_behavior"][b]["present"], star)
            row(f"{b}: without", lambda f, b=b: f["by_behavior"][b]["absent"])
    for q in ("Q1", "Q2", "Q3", "Q4"):
        m = per[rewards[0]]["by_length"][q]
        row(f"length {q} ({m['chars_min']}–{m['chars_max']} chars)", lambda f, q=q: f["by_length"][q])
    console.print(side)
    if by_behavior:
        console.print("* the with − without recall difference has a 95 % interval that excludes 0")
    if show:
        slow = Table(title=f"slowest cases ({first.reward})")
        for column in ["id", "seconds", "verdict", "gold", "candidate"]:
            slow.add_column(column)
        for v in first.slowest(show):
            slow.add_row(v.id, f"{v.seconds:.2f}", str(v.verdict), str(v.gold)[:40], v.candidate[-60:])
        console.print(slow)
        wrong = Table(title=f"wrong verdicts (label → verdict, {first.reward})")
        for column in ["id", "label", "verdict", "gold", "candidate (end)"]:
            wrong.add_column(column)
        for v in first.errors()[:show]:
            wrong.add_row(v.id, str(v.equivalent), str(v.verdict), str(v.gold)[:40], v.candidate[-60:])
        console.print(wrong)
    if verdicts:
        for name, result in results.items():
            target = verdicts if len(rewards) == 1 else verdicts.with_name(
                f"{verdicts.stem}.{name.split('/')[-1]}{verdicts.suffix}")
            console.print(f"verdicts ({name}) → {write_verdicts(result, target)}")
    if report:
        console.print(f"report → {write_report(figures, report)}")
        if rejects:
            rejects_path = report.with_name(report.stem + ".rejects.jsonl")
            rejects_path.write_text("".join(json.dumps(r, ensure_ascii=False, default=str) + "\n"
                                            for r in rejects))
            console.print(f"rejected rows → {rejects_path}")
    if plot or report:
        console.print(f"plot → {plot_report(figures, plot or report.with_suffix('.png'))}")
    for name, result in results.items():
        if result.recall_warning:
            console.print(f"[bold white on red] WARNING: {name} recall {pct(result.overall.recall)} is below "
                          f"{pct(RECALL_FLOOR)}: this verifier rejects correct answers, and RL with it can end worse "
                          "than no RL at all. [/]")


@app.command("filter-passrate")
@job_command(PassRateJob)
def filter_passrate(job: PassRateJob) -> None:
    """Keep the prompts a policy solves sometimes but not always: k samples per prompt, scored by the row's reward.

    Rerunning with another --band reuses the samples. Each task starts its own model server; with --executor
    slurm, rerun the command when the job has finished. Examples:

        curate filter-passrate --dataset datasets/math --model Qwen/Qwen2.5-1.5B-Instruct --backend vllm --k 8 --band 0,1 -o datasets/math-pr

        curate filter-passrate --dataset datasets/math --model Qwen/Qwen2.5-1.5B-Instruct --k 8 --band 0.1,0.9 -o datasets/math-pr

        curate filter-passrate --dataset /shared/math --model Qwen/Qwen2.5-7B-Instruct --backend vllm --tasks 16 --gpus-per-task 1 --executor slurm --slurm-partition gpu -o /shared/math-pr
    """
    from curate.handoff.passrate import filter_by_pass_rate

    result = filter_by_pass_rate(job)
    output = job.output
    if result is None:
        up_to_date(output)
        return
    sampling = result.sampling
    rows = [(f"kept ({split})", f"{n:,}") for split, n in sorted(result.kept.items())]
    rows += [(f"dropped: {reason}", f"{n:,}") for reason, n in result.rejected.most_common()]
    rows += [(f"prompts with {c}/{result.k} correct", f"{n:,}") for c, n in sorted(result.histogram.items())]
    rows += [("samples", f"{sampling.samples:,} ({sampling.completion_tokens:,} tokens, {sampling.seconds:.0f} s)"),
             ("data", str(output / "data")), ("rejects", str(output / "rejects"))]
    summary(f"Pass rate of {job.model} in ({job.band}) → {output}", rows)


@app.command("audit-policy")
@server_group(config=sampling_config, sampling=True, judge=True, also=("k", "prompt_format"))
def audit_policy(
    model: Annotated[str | None, typer.Option(help="The policy: hub name or local directory (or --checkpoints).")] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="Report, samples and prompts.")] = Path("policy-audit"),
    task: Annotated[str | None, typer.Option(help="Generated task: countdown (default unless --dataset).")] = None,
    dataset: Annotated[Path | None, typer.Option(help="Prompts from a built dataset with RL columns instead of a task.")] = None,
    n: Annotated[int, typer.Option(help="Prompts.", min=1)] = 200,
    k: Annotated[int, typer.Option(help="Samples per prompt.", min=1)] = 1,
    seed: Annotated[int, typer.Option(help="Seed of the generated task prompts.")] = 0,
    classifier: Annotated[str, typer.Option("--classifier", "-c", help="Labels the behaviors of every response: a "
                                            "batch classifier (cues, distilled:DIR, a versioned name), or llm_v1 / "
                                            "cascade_v1 in-line on the model --judge-model names.")] = "cues",
    checkpoints: Annotated[str | None, typer.Option(help="A glob of checkpoint directories of one training run "
                                                       "('ckpts/step_*'): one audit each, in step order, into "
                                                       "OUTPUT/<checkpoint>, and plots of behaviors and accuracy over "
                                                       "steps.")] = None,
    prompt_format: Annotated[str, typer.Option(help="chat (messages, /v1/chat/completions) or tinyzero (the raw "
                                               "TinyZero completion prompt through /v1/completions, for base "
                                               "models).")] = "chat",
    *,
    server: SamplingOptions,
    judge: ServerOptions | None,
) -> None:
    """Sample a policy on a task, label the behaviors in its outputs, report each behavior's rate and the accuracy.

    Run it before RL: a model whose outputs never verify or backtrack needs priming first. Examples:

        curate audit-policy --model Qwen/Qwen2.5-3B --task countdown --n 200 --backend vllm

        curate audit-policy --model Qwen/Qwen2.5-1.5B-Instruct --dataset datasets/math --n 100 --k 4 --device cpu

        curate audit-policy --checkpoints 'ckpts/step_*' --prompt-format tinyzero --task countdown --n 200 --backend vllm -o audits/run1

    With --classifier llm_v1 (or cascade_v1) the responses are labeled in-line by the model --judge-model names,
    through `curate tag-llm`'s job (OUTPUT/tags/). That judge runs on the policy's server settings (--backend,
    --endpoint-url, --device, --tp, ...) unless --judge-backend / --judge-endpoint-url name its own:

        curate audit-policy --model Qwen/Qwen2.5-3B --backend vllm --classifier llm_v1 \\
            --judge-model Qwen/Qwen2.5-32B-Instruct --judge-backend endpoint --judge-endpoint-url http://judge:8000/v1
    """
    from curate.handoff.policy_audit import run_checkpoint_sweep, run_policy_audit

    if (model is None) == (checkpoints is None):
        fail("give the policy as --model M, or a training run's checkpoints as --checkpoints 'ckpts/step_*'")
    audit = {"task": task or (None if dataset else "countdown"), "dataset": dataset, "n": n, "seed": seed,
             "classifier": classifier, "judge": judge}
    pct = lambda v: "-" if v is None else f"{100 * v:.1f} %"
    if checkpoints is not None:
        sweep = run_checkpoint_sweep(checkpoints, output, server, **audit)
        rows = [(f"step {step}", f"accuracy {pct(a.accuracy)}; " + ", ".join(
                    f"{b} {pct(r.rate)} / {'-' if r.mean_count is None else f'{r.mean_count:.2f}'}"
                    for b, r in a.behaviors.items())) for step, a in zip(sweep.steps, sweep.audits)]
        rows += [("plot", str(output / "behaviors_over_steps.png")), ("report", str(output / "README.md"))]
        return summary(f"Behaviors over {len(sweep.steps)} checkpoints of {checkpoints} (share / mean count)", rows)
    result = run_policy_audit(output, server, **audit)
    rows = [("samples / prompts", f"{result.samples:,} / {result.prompts:,}"),
            ("accuracy", f"{pct(result.accuracy)} ({result.correct:,} / {result.scored:,} scored)"),
            ("cut at the token limit / empty / request errors", f"{result.truncated:,} / {result.empty:,} / {result.request_errors:,}"),
            ("samples without behavior labels", f"{result.unlabelled:,}" + (
                " (" + ", ".join(f"{why}: {count:,}" for why, count in result.unlabelled_reasons.items()) + ")"
                if result.unlabelled else ""))]
    rows += [(f"{b}", (f"{pct(r.rate)} of outputs, {'-' if r.mean_count is None else f'{r.mean_count:.2f}'} per output; "
                      f"accuracy {pct(r.accuracy_with)} with, {pct(r.accuracy_without)} without"))
             for b, r in result.behaviors.items()]
    rows.append(("report", str(output / "README.md")))
    summary(f"Behavior audit of {model} on {result.task} ({result.classifier})", rows)


@app.command("handoff")
def handoff(
    dataset: Annotated[Path, typer.Argument(help="Built dataset (DATASET/data/SPLIT-*.parquet).")],
    trainer: Annotated[str, typer.Option(help="verl | trl")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Kit directory: exports, config/scripts, README.md.")],
    instruction: Annotated[str | None, typer.Option(help="Appended to every prompt; default: the reward's own instruction; '' for none.")] = None,
    system: SystemOption = None,
    overwrite: OverwriteOption = False,
) -> None:
    """Write what to run next: verl (config fragment + run_verl.sh) or TRL (train_sft.py / train_grpo.py), with the export.

    Examples:

        curate handoff datasets/math-pr --trainer verl --output kits/math-verl && MODEL=Qwen/Qwen2.5-3B kits/math-verl/run_verl.sh

        curate handoff datasets/priming --trainer trl --output kits/priming && python kits/priming/train_sft.py --model Qwen/Qwen2.5-0.5B
    """
    from curate.handoff.kits import run_handoff

    result = export_once("handoff", run_handoff, dataset, trainer, output, instruction, system, overwrite)
    if result is None:
        return
    rows = [(f"{part} rows ({split})", f"{n:,}") for part, export in result.exports.items() for split, n in sorted(export.rows.items())]
    rows += [(f"reward {name}", f"{n:,} rows") for name, n in sorted(result.data_sources.items())]
    rows += [(f"skipped {part}", why) for part, why in result.skipped.items()]
    rows += [("wrote", ", ".join(p.name for p in result.files))]
    summary(f"{trainer} launch kit → {output}", rows)

