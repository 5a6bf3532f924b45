"""Commands that check the labels on the user's own corpus: review, calibrate, adapt."""

from __future__ import annotations

from rich.table import Table

from curate.cli.app import app, console
from curate.cli.groups import job_command
from curate.cli.options import summary
from curate.review.jobs import AdaptJob, CalibrateJob, ReviewJob


@app.command()
@job_command(ReviewJob)
def review(job: ReviewJob) -> None:
    """Label a sample of your tagged documents in a browser: every behavior's evidence highlighted, its score shown;
    mark each behavior present or absent (keys 1-4), a span wrong (j/k, x), Enter for the next. Labels are appended
    to OUTPUT/labels.jsonl as they are given; rerunning the command resumes. The page is served on 127.0.0.1 only.

    Examples:

        curate review --tags tags/cues_ngram_v1 --input 'owm/*.parquet' --sample 200 -o review/

        curate calibrate --labels review/labels.jsonl --tags tags/cues_ngram_v1 -o calibration/
    """
    from curate.review.sample import LABELS_FILE, create_sample
    from curate.review.server import HOST, bind, make_app, serve

    design = create_sample(job.tags, job.corpus, job.output, job.sample, job.seed)
    app_ = make_app(job.output, job.max_chars)
    state = app_.state.review_state()
    listener = bind(job.port)
    port = listener.getsockname()[1]
    strata = ", ".join(f"{name} {s['sample']}/{s['size']:,}" for name, s in design["strata"].items())
    console.print(f"{design['classifier']}: {state['total']} documents drawn from {design['documents']:,} "
                  f"(per stratum, drawn/size: {strata}); {state['read']} read so far")
    console.print(f"labels → {job.output / LABELS_FILE}; Ctrl-C stops the page (nothing is lost)")
    print(f"Review at http://{HOST}:{port}/", flush=True)  # on stdout: the one line a script reads
    serve(app_, listener)


@app.command()
@job_command(CalibrateJob)
def calibrate(job: CalibrateJob) -> None:
    """Precision, recall and F1 per behavior with 95 % intervals, from labels read on your corpus, weighted back to
    the corpus by the review's sampling design (plain figures for labels without one); the precision/recall curve
    over the threshold where the tags carry scores. Writes OUTPUT/calibration.json and OUTPUT/pr_curve.png.

    Example:

        curate calibrate --labels review/labels.jsonl --tags tags/cues_ngram_v1 -o calibration/

        curate calibrate --labels review/labels.jsonl --tags tags/cues_ngram_v1 -o calibration/ --card datasets/bt
    """
    from curate.review.calibrate import calibrate as run_calibrate

    report = run_calibrate(job.labels, job.tags, job.output, job.resamples, job.seed, job.card)

    def cell(f: dict) -> str:
        if f["value"] is None:
            return "-"
        return f"{f['value']:.2f} [{f['ci_low']:.2f}-{f['ci_high']:.2f}]"

    table = Table(title=f"{report['classifier']} on {report['documents']} labeled documents "
                        f"({'weighted to the corpus' if report['weighted'] else 'plain figures, no sampling design'})",
                  title_justify="left")
    for column in ("behavior", "precision [95 % CI]", "recall [95 % CI]", "F1 [95 % CI]", "labeled present"):
        table.add_column(column, justify="left" if column == "behavior" else "right")
    for behavior, data in report["behaviors"].items():
        table.add_row(behavior, cell(data["precision"]), cell(data["recall"]), cell(data["f1"]),
                      f"{data['n_labeled_present']}")
    console.print(table)
    if report["left_out_error_rows"]:
        console.print(f"[yellow]left out: {report['left_out_error_rows']} labeled documents whose tags hold an "
                      "error[/]")
    console.print(f"report → {job.output / 'calibration.json'}"
                  + (f"; plot → {job.output / 'pr_curve.png'}" if (job.output / "pr_curve.png").exists() else "")
                  + (f"; card → {job.card / 'README.md'}" if job.card else ""))


@app.command()
@job_command(AdaptJob)
def adapt(job: AdaptJob) -> None:
    """Refit the n-gram heads (or only their thresholds) on your labels plus the shipped training labels, measure
    the refit by cross-validation on your labels against the classifier it starts from, and save it as a new
    version in your model folder (a shipped model is never overwritten). Tag with it by its folder.

    Examples:

        curate adapt --labels review/labels.jsonl --shipped-labels evals/ --models models/

        curate adapt --labels review/labels.jsonl --refit thresholds --models models/

        curate tag --classifier user_ngram:models/adapted_ngram_v1 --input 'owm/*.parquet' -o tags/
    """
    from curate.review.adapt import adapt as run_adapt

    result = run_adapt(job)
    table = Table(title=f"cross-validated F1 on your {result.user_labels} labels ({job.folds} folds)",
                  title_justify="left")
    for column in ("behavior", job.base, "adapted", "threshold"):
        table.add_column(column, justify="left" if column == "behavior" else "right")
    for behavior, scores in result.cross_validation.items():
        table.add_row(behavior, f"{scores['base_f1']:.3f}", f"{scores['adapted_f1']:.3f}", f"{scores['threshold']:.2f}")
    console.print(table)
    rows = [("trained on", f"{result.user_labels} of your labels, {result.shipped_labels:,} shipped"),
            ("macro F1 (cross-validated)", f"{result.base_macro_f1:.3f} → {result.adapted_macro_f1:.3f}"),
            ("model", str(result.directory)), ("tag with", f"--classifier user_ngram:{result.directory}")]
    summary(f"Adapted {job.base} ({job.refit}) → {result.directory.name}", rows)
    if result.adapted_macro_f1 <= result.base_macro_f1:
        console.print(f"[yellow]the adapted model does not beat {job.base} on your labels; keep tagging with "
                      f"{job.base}[/]")
