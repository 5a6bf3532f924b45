"""What the commands share: the input spec, the output claim, errors and summaries (the input,
executor, model-server and cleaning options are groups of their own: curate.cli.groups)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from curate.behaviors import BEHAVIOR_NAMES
from curate.cli.app import console
from curate.pipelines.jobs import SAMPLE_CORPUS, SAMPLE_GLOB


def write_once(output: Path, command: str, parameters: dict, write, inputs=None, overwrite: bool = False,
               keep: tuple[str, ...] = (), abandon: bool = False):
    """`write()` into `output` under a claim (state.claim_output, with the options that decide what it writes, not
    how it runs: tasks, workers, executor): None, said so, when the folder is up to date; else
    what `write()` returns, once the claim is finished. A failed write leaves the claim unfinished, so the same
    command resumes it; with `abandon`, a failed write into a new folder removes it (an export has nothing to
    resume). A Slurm submission is an exception too: the rerun continues it (curate.pipelines.state.write_once)."""
    from curate.pipelines.state import write_once as write_claimed

    # A folder holding another dataset raises OutputOccupiedError, a CurateError: one line and exit 2 (cli.app).
    result = write_claimed(output, command, parameters, write, inputs=inputs, overwrite=overwrite, keep=keep,
                           abandon=abandon)
    return up_to_date(output) if result is None else result


def up_to_date(output: Path) -> None:
    console.print(f"{output} is up to date: built by this same command from the same input; nothing to do "
                  "(--overwrite builds it again).")


def fail(message: str) -> None:
    console.print(f"[bold red]error:[/] {message}", soft_wrap=True)  # one line, however wide the terminal
    raise typer.Exit(2)


def input_spec(input: str | None, text_key: str, id_key: str, split: str, streaming: bool):
    from curate.pipelines.readers import InputSpec

    if input is None:
        console.print(f"[yellow]No --input given: using the bundled sample corpus ({SAMPLE_CORPUS}).[/]")
        input = SAMPLE_GLOB
    spec = InputSpec(path=input, text_key=text_key, id_key=id_key, split=split, streaming=streaming)
    if not spec.is_hub:
        try:
            spec.list_files()  # a folder or glob that matches nothing fails here, in one line
        except FileNotFoundError as error:
            fail(str(error))
    return spec


def summary(title: str, rows: list[tuple[str, str]]) -> None:
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(justify="right")
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)


def tag_rows(tags_dir: Path, rejects_dir: Path, seconds: float) -> list[tuple[str, str]]:
    from curate.pipelines.query import behavior_stats, count_rejects, parquet_files

    stats = behavior_stats(tags_dir)[0] if parquet_files(tags_dir) else None
    rejects = count_rejects(rejects_dir)
    tagged = stats.documents - stats.errors if stats else 0
    read = (stats.documents if stats else 0) + sum(rejects.values())
    rows = [
        ("read", f"{read:,}"),
        ("tagged", f"{tagged:,}"),
        ("classifier errors (counts null)", f"{stats.errors if stats else 0:,}"),
        ("rejected", f"{sum(rejects.values()):,}" + (f"  ({', '.join(f'{k}: {v}' for k, v in rejects.items())})" if rejects else "")),
        ("characters", f"{stats.characters if stats else 0:,}"),
        ("documents/s", f"{read / seconds:,.1f}" if seconds > 0 else "-"),
    ]
    if stats:
        rows += [(f"  with {b}", f"{stats.present[b]:,} ({100 * stats.prevalence[b]:.1f} %)") for b in BEHAVIOR_NAMES]
    if rejects:
        rows.append(("rejects kept in", str(rejects_dir)))
    return rows


def update_rows(result) -> list[tuple[str, str]]:
    """What a tag run over a changed corpus did: the files it tagged anew, the files whose rows it dropped."""
    def listed(names: list[str]) -> str:
        return f"{len(names):,} ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"

    rows = []
    if result.updated_files:
        rows.append(("files new or changed, tagged", listed(result.updated_files)))
    if result.removed_files:
        rows.append(("files removed, rows dropped", listed(result.removed_files)))
    return rows


def cleaning_rows(output: Path, cleaning) -> list[tuple[str, str]]:
    """Summary lines of a builder's --dedup / --decontam (a Cleaning), from the reports they leave in OUTPUT/.curate/."""
    import json

    rows = []
    if cleaning.dedup:
        report = json.loads((output / ".curate" / "dedup.json").read_text())
        rows.append(("duplicates removed", (f"{report['exact_removed']:,} exact, {report['near_removed']:,} near "
                                           f"(of {report['read']:,})")))
    if cleaning.decontam:
        report = json.loads((output / ".curate" / "decontam.json").read_text())
        hits = ", ".join(f"{name} {n:,}" for name, n in report["hits"].items()) or "none"
        rows.append(("contaminated removed", f"{report['removed']:,} of {report['read']:,} ({hits})"))
    return rows


def llm_tag_config(**fields):
    """tag-llm's LLMTagOptions (ServerOptions plus how tagging prompts), for `server_group(config=...)`: imported
    when a command runs, since curate.pipelines.llm.tag_options imports datatrove."""
    from curate.pipelines.llm.tag_options import LLMTagOptions

    return LLMTagOptions(**fields)


def sampling_config(**fields):
    """The pass-rate filter's SamplingOptions (the policy's ServerOptions plus how it is sampled), for
    `server_group(config=...)`: imported when a command runs, since curate.handoff.sampling imports datatrove."""
    from curate.handoff.sampling import SamplingOptions

    return SamplingOptions(**fields)

