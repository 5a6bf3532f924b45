"""The `curate audit-verifier` job: the rewards' precision and recall on labeled pairs (read by pair_sources, scored
by verifier_audit, stratified by behavior_audit) or on the policy's own responses (onpolicy_audit), and the files it
writes (--verdicts, --report with its rejected rows, --plot).

Its own module: onpolicy_audit imports verifier_audit, so the job that runs either audit sits above both."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from curate.classifiers import get_classifier
from curate.errors import CurateError
from curate.files import write_text_atomic
from curate.handoff.behavior_audit import plot_report, run_stratified_audit, write_report
from curate.handoff.jobs import VerifierAuditJob
from curate.handoff.onpolicy_audit import OnPolicyAudit, ProblemColumns, judge_options, run_onpolicy_audit
from curate.handoff.pair_sources import Columns, read_pair_source
from curate.handoff.verifier_audit import AuditResult, write_verdicts
from curate.rewards import get_reward


class VerifierAuditError(CurateError, ValueError):
    pass


@dataclass
class VerifierAudit:
    rewards: list[str]  # the audited rewards' data sources, in the order asked
    report: dict  # every figure (behavior_audit.audit_report), as --report writes it
    results: dict[str, AuditResult]  # data source -> its verdicts and metrics
    rejects: list[dict]  # rows of --pairs that could not be read, or responses left without a reference label
    pairs: int
    label_source: str
    onpolicy: OnPolicyAudit | None = None  # the on-policy run: samples, reference labels
    written: list[tuple[str, Path]] = field(default_factory=list)  # (what, path) of every file written, in order


def check_verifier_audit(job: VerifierAuditJob) -> None:
    """The audit's source (--pairs, or --policy with --problems) and its classifier, checked before anything runs."""
    if bool(job.pairs) == bool(job.policy):
        raise VerifierAuditError("give --pairs FILE (jsonl or parquet; repeat for several files), or --policy MODEL "
                                 "--problems DATASET for the policy's own responses")
    if job.policy and not job.problems:
        raise VerifierAuditError("--policy needs --problems: a built dataset or a jsonl/parquet file with question "
                                 "and answer columns")
    if job.by_behavior:
        get_classifier(job.by_behavior)  # an unknown classifier fails now, with the list


def behavior_classifier(job: VerifierAuditJob) -> str | None:
    """What tags the responses: --by-behavior, on-policy `cues` by default."""
    return job.by_behavior or ("cues" if job.policy else None)


def audit_verifier(job: VerifierAuditJob, progress: bool = True) -> VerifierAudit:
    """Runs `curate audit-verifier`: audits every reward of `job.reward` (default math) on the labeled pairs or the
    policy's own responses, then writes the verdicts, the report (on-policy: OUTPUT/report.json by default), its
    rejected rows and the plot."""
    check_verifier_audit(job)
    rewards = [get_reward(r).data_source for r in job.reward or ["math"]]
    if job.policy:
        onpolicy = run_onpolicy_audit(
            job.problems, job.output, job.server, rewards, behavior_classifier(job), limit=job.n,
            columns=ProblemColumns(job.question_key, job.answer_key, job.id_key), data_source=job.data_source,
            judge=judge_options(job.server, job.judge, job.judge_max_tokens) if job.judge else None, label=job.label,
            resamples=job.bootstrap, seed=job.seed, threads=job.threads, progress=progress, overwrite=job.overwrite)
        audit = VerifierAudit(rewards, onpolicy.report, onpolicy.results, onpolicy.labeled.rejects,
                              len(onpolicy.labeled.pairs), onpolicy.report["label_source"], onpolicy)
    else:
        columns = Columns(job.response_key, job.gold_key, job.label_key, job.id_key, job.group_key)
        pair_set = read_pair_source(job.pairs, job.pairs_format, columns)
        if not pair_set.pairs:
            first = f": {pair_set.rejects[0]['reason']}" if pair_set.rejects else ""
            raise VerifierAuditError(f"no valid pairs in {', '.join(map(str, job.pairs))} "
                                     f"({len(pair_set.rejects):,} rows rejected{first})")
        source = {"format": pair_set.format, "label_source": pair_set.label_source, "paths": pair_set.paths,
                  "rejected": len(pair_set.rejects)}
        stratified = run_stratified_audit(pair_set.pairs, rewards, behavior_classifier(job), job.bootstrap, job.seed,
                                          job.threads, source, progress)
        audit = VerifierAudit(rewards, stratified.report, stratified.results, pair_set.rejects, len(pair_set.pairs),
                              pair_set.label_source)
    write_outputs(job, audit)
    return audit


def write_outputs(job: VerifierAuditJob, audit: VerifierAudit) -> None:
    """--verdicts (one file per reward when several are audited), --report and its rejected rows, --plot."""
    if job.verdicts:
        for name, result in audit.results.items():
            target = job.verdicts if len(audit.rewards) == 1 else job.verdicts.with_name(
                f"{job.verdicts.stem}.{name.split('/')[-1]}{job.verdicts.suffix}")
            audit.written.append((f"verdicts ({name})", write_verdicts(result, target)))
    report = job.report or (job.output / "report.json" if job.policy else None)
    if report:
        audit.written.append(("report", write_report(audit.report, report)))
        if audit.rejects:
            rejects = report.with_name(report.stem + ".rejects.jsonl")
            write_text_atomic(rejects, "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n"
                                               for r in audit.rejects))
            audit.written.append(("rejected rows", rejects))
    if job.plot or report:
        audit.written.append(("plot", plot_report(audit.report, job.plot or report.with_suffix(".png"))))
