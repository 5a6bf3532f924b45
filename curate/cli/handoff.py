"""Commands that hand datasets to trainers: export, reward-path, audit-verifier, filter-passrate,
audit-policy, handoff, publish."""

from __future__ import annotations

import typer
from rich.table import Table

from curate.cli.app import app, console
from curate.cli.groups import job_command
from curate.cli.options import summary, up_to_date
from curate.handoff.jobs import ExportJob, HandoffJob, PassRateJob, PolicyAuditJob, PublishJob, VerifierAuditJob


@app.command()
@job_command(PublishJob)
def publish(job: PublishJob) -> None:
    """Check a dataset (loads with `datasets`; card metadata license, task_categories, size_categories,
    configs) and push it to the Hugging Face Hub as one commit. The token comes from HF_TOKEN and is never printed.

    Examples:

        curate publish datasets/backtracking --repo-id my-org/backtracking --dry-run

        HF_TOKEN=hf_... curate publish datasets/backtracking --repo-id my-org/backtracking --private
    """
    from curate.handoff.publish import UploadError
    from curate.handoff.publish import publish as run_publish

    try:
        result = run_publish(job)
    except UploadError as error:
        console.print(f"[bold red]upload failed:[/] {error}")
        raise typer.Exit(1)
    plan = result.plan
    if job.dry_run:
        table = Table(title=f"Would upload to {job.repo_id} ({'private' if job.private else 'public'})",
                      title_justify="left")
        table.add_column("path in repo")
        table.add_column("bytes", justify="right")
        for f in plan.files:
            table.add_row(f.path_in_repo, f"{f.size:,}")
        console.print(table)
    rows = [("repo", job.repo_id), ("files", f"{len(plan.files):,}"), ("bytes", f"{plan.total_bytes:,}")]
    rows += [(f"rows {config}/{split}", f"{n:,}") for config, splits in plan.rows.items() for split, n in splits.items()]
    if result.commit_url:
        rows += [("commit", result.commit_url)] + [("deleted stale", p) for p in result.deleted]
    summary("Dry run: nothing uploaded" if job.dry_run else f"Published {job.directory}", rows)


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
    """Print the reward file verl loads (`reward.custom_reward_function.path`; name: `compute_score`) and the rewards.
    The file imports the installed curate, so curate must be installed in the trainer's Python; kits name the same
    module as pkg://curate.rewards.verl_reward.

    Example:

        python -m verl.trainer.main_ppo reward.custom_reward_function.path=$(curate reward-path) ...
    """
    from curate.rewards import REWARD_PATH, REWARDS

    for name, reward in sorted(REWARDS.items()):
        console.print(f"[bold]{name}[/]: {reward.description}")
    print(REWARD_PATH)


@app.command("audit-verifier")
@job_command(VerifierAuditJob)
def audit_verifier(job: VerifierAuditJob) -> None:
    """Measure rewards' precision and recall on labeled pairs, overall, per answer type, by response length and,
    with --by-behavior, with and without each behavior (bootstrap 95 % intervals); warn when recall < 0.95.

    Examples:

        curate audit-verifier --pairs evals/verifier_pairs/pairs.jsonl

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
    from curate.handoff.verifier_audit import RECALL_FLOOR
    from curate.handoff.verifier_audit_job import audit_verifier as run_audit

    audit = run_audit(job)
    # by_behavior: the classifier that tagged the responses (on-policy, cues unless --by-behavior names another)
    figures, results, rewards, by_behavior = audit.report, audit.results, audit.rewards, audit.report["classifier"]
    n_pairs, label_source, show = audit.pairs, audit.label_source, job.show
    if audit.onpolicy:
        reference = figures["reference"]
        reused = audit.onpolicy.labeled.reused_samples
        console.print(f"{figures['samples']:,} responses of {job.policy} on {figures['problems']:,} problems (k={job.k}"
                      f"{', reused from ' + str(job.output / 'responses.jsonl') if reused else ''}); "
                      f"strict judge: {reference['strict']['correct']:,} correct, {reference['strict']['incorrect']:,} "
                      f"incorrect, {reference['strict']['undecided']:,} undecided"
                      + (f"; LLM judge agrees on {reference['agreement']['agree']:,} of "
                         f"{reference['agreement']['both_decided']:,}" if "agreement" in reference else ""))
        for reason, count in figures["rejected_reasons"].items():
            console.print(f"[yellow]left out: {count:,} responses ({reason})[/]")
    else:
        for reject in audit.rejects[:show]:
            console.print(f"[yellow]skipped {reject.get('source', '')}:{reject.get('line', '')}: {reject['reason']}[/]")
        if len(audit.rejects) > show:
            console.print(f"[yellow]… {len(audit.rejects) - show:,} more rejected rows[/]")

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
    for answer_format in per[rewards[0]]["by_format"]:
        false_accepts = lambda f, a=answer_format: f" FA {pct(f['by_format'][a]['false_accept_rate'])}"
        row(f"answer format: {answer_format}", lambda f, a=answer_format: f["by_format"][a], false_accepts)
    console.print(side)
    if by_behavior:
        console.print("* the with − without recall difference has a 95 % interval that excludes 0")
    console.print("FA: false-accept rate, wrong responses the reward pays / wrong responses")
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
    for what, path in audit.written:
        console.print(f"{what} → {path}")
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
@job_command(PolicyAuditJob)
def audit_policy(job: PolicyAuditJob) -> None:
    """Sample a policy on a task, label the behaviors in its outputs, report each behavior's rate and the accuracy.

    Run it before RL: a model whose outputs never verify or backtrack needs priming first. Examples:

        curate audit-policy --model Qwen/Qwen2.5-3B --task countdown --n 200 --backend vllm

        curate audit-policy --model Qwen/Qwen2.5-1.5B-Instruct --dataset datasets/math --n 100 --k 4 --device cpu

        curate audit-policy --checkpoints 'ckpts/step_*' --prompt-format tinyzero --task countdown --n 200 --backend vllm -o audits/run1

    With --rollouts the same curves come from the rollouts a run already logged (verl's trainer.rollout_data_dir,
    TRL's output_dir with log_completions=True), without sampling:

        curate audit-policy --rollouts runs/grpo1/rollouts -o audits/grpo1

    With --classifier llm_v1 (or cascade_v1) the responses are labeled in-line by the model --judge-model names,
    through `curate tag-llm`'s job (OUTPUT/tags/). That judge runs on the policy's server settings (--backend,
    --endpoint-url, --device, --tp, ...) unless --judge-backend / --judge-endpoint-url name its own:

        curate audit-policy --model Qwen/Qwen2.5-3B --backend vllm --classifier llm_v1 \\
            --judge-model Qwen/Qwen2.5-32B-Instruct --judge-backend endpoint --judge-endpoint-url http://judge:8000/v1
    """
    from curate.handoff.policy_audit import SweepResult
    from curate.handoff.policy_audit import audit_policy as run_audit

    result = run_audit(job)
    pct = lambda v: "-" if v is None else f"{100 * v:.1f} %"
    if isinstance(result, SweepResult):
        rows = [(f"step {step}", f"accuracy {pct(a.accuracy)}; " + ", ".join(
                    f"{b} {pct(r.rate)} / {'-' if r.mean_count is None else f'{r.mean_count:.2f}'}"
                    for b, r in a.behaviors.items())) for step, a in zip(result.steps, result.audits)]
        rows += [("plot", str(job.output / "behaviors_over_steps.png")), ("report", str(job.output / "README.md"))]
        what = f"checkpoints of {job.checkpoints}" if job.rollouts is None else f"steps logged in {job.rollouts}"
        return summary(f"Behaviors over {len(result.steps)} {what} (share / mean count)", rows)
    rows = [("samples / prompts", f"{result.samples:,} / {result.prompts:,}"),
            ("accuracy", f"{pct(result.accuracy)} ({result.correct:,} / {result.scored:,} scored)"),
            ("cut at the token limit / empty / request errors", f"{result.truncated:,} / {result.empty:,} / {result.request_errors:,}"),
            ("samples without behavior labels", f"{result.unlabelled:,}" + (
                " (" + ", ".join(f"{why}: {count:,}" for why, count in result.unlabelled_reasons.items()) + ")"
                if result.unlabelled else ""))]
    rows += [(f"{b}", (f"{pct(r.rate)} of outputs, {'-' if r.mean_count is None else f'{r.mean_count:.2f}'} per output; "
                      f"accuracy {pct(r.accuracy_with)} with, {pct(r.accuracy_without)} without"))
             for b, r in result.behaviors.items()]
    rows.append(("report", str(job.output / "README.md")))
    summary(f"Behavior audit of {job.model} on {result.task} ({result.classifier})", rows)


@app.command("handoff")
@job_command(HandoffJob)
def handoff(job: HandoffJob) -> None:
    """Write what to run next: verl (config fragment + run_verl.sh) or TRL (train_sft.py / train_grpo.py), with the export.

    Examples:

        curate handoff datasets/math-pr --trainer verl --output kits/math-verl && MODEL=Qwen/Qwen2.5-3B kits/math-verl/run_verl.sh

        curate handoff datasets/priming --trainer trl --output kits/priming && python kits/priming/train_sft.py --model Qwen/Qwen2.5-0.5B
    """
    from curate.handoff.kits import handoff as run_handoff

    result = run_handoff(job)
    if result is None:
        up_to_date(job.output)
        return
    rows = [(f"{part} rows ({split})", f"{n:,}") for part, export in result.exports.items() for split, n in sorted(export.rows.items())]
    rows += [(f"reward {name}", f"{n:,} rows") for name, n in sorted(result.data_sources.items())]
    rows += [(f"skipped {part}", why) for part, why in result.skipped.items()]
    rows += [("wrote", ", ".join(p.name for p in result.files))]
    summary(f"{job.trainer} launch kit → {job.output}", rows)

