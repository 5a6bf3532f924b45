"""--dedup / --decontam on the source problems, before chaining: the ids to set aside and the card's sections. After
chaining it would be too late: single rows repeat the first hop of a half row by construction."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from curate.errors import OptionError
from curate.pipelines.decontam import decontam_card_section, decontaminate
from curate.pipelines.dedup import dedup as run_dedup
from curate.pipelines.dedup import dedup_card_section
from curate.pipelines.readers import InputSpec
from curate.pipelines.state import STATE

SOURCES_NOTE = ("Applied to the source problems before chaining (a removed problem is in `rejects/sources.jsonl` "
                "with reason `{reason}`, details below), so the full, half and single sets stay built from the same "
                "problems.")


def clean_sources(
    spec: InputSpec, output: Path, answer_key: str, dedup: bool, decontam: str | None,
    benchmarks_dir: str | Path | None, progress: bool,
) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """Runs dedup and decontamination on the source problems: the ids to set aside (id -> (reason, detail))
    and the card sections. After chaining it would be too late: single rows repeat the first hop of a half
    row by construction, and a removal from one set would leave the ablation sets unmatched."""
    excluded: dict[str, tuple[str, str]] = {}
    sections: dict[str, str] = {}
    for stale in (STATE + "/dedup.json", STATE + "/decontam.json", "rejects/duplicates.jsonl",
                  "rejects/contaminated.jsonl"):
        (output / stale).unlink(missing_ok=True)
    if not (dedup or decontam):
        return excluded, sections
    if spec.is_hub:
        raise OptionError("--dedup / --decontam read the source problems from local files: save the hub split as "
                         "jsonl or parquet first")
    if dedup:
        stage = output / STATE / "sources_dedup"
        result = run_dedup(spec.path, stage, text_key=spec.text_key, id_key=spec.id_key, progress=progress)
        for record in _jsonl(stage / "rejects" / "duplicates.jsonl"):
            excluded[record["id"]] = ("duplicate_source", f"{record['reason']} of {record['duplicate_of']}")
        sections["dedup"] = _with_note(dedup_card_section(result), "duplicate_source")
        _keep_reports(stage, output, "dedup.json", "duplicates.jsonl")
    if decontam:
        stage = output / STATE / "sources_decontam"
        result = decontaminate(spec.path, stage, decontam, fields=[spec.text_key, answer_key], id_key=spec.id_key,
                               benchmarks_dir=benchmarks_dir, progress=progress)
        for record in _jsonl(stage / "rejects" / "contaminated.jsonl"):
            excluded.setdefault(record["id"], (
                "contaminated_source",
                (f"{record['benchmark']} item {record['benchmark_item']} ({record['benchmark_field']}): "
                 f"{record['field']} matched {record['match']} {record['ngram']!r}"),
            ))
        sections["decontam"] = _with_note(decontam_card_section(result), "contaminated_source")
        _keep_reports(stage, output, "decontam.json", "contaminated.jsonl")
    return excluded, sections


def _jsonl(path: Path):
    if path.exists():
        with path.open(encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)


def _with_note(section: str, reason: str) -> str:
    heading, _, body = section.partition("\n\n")
    return f"{heading}\n\n{SOURCES_NOTE.format(reason=reason)}\n\n{body}"


def _keep_reports(stage: Path, output: Path, report: str, removed: str) -> None:
    """Keeps the cleaning report and the removed rows; drops the stage, a cleaned copy of the input that nothing
    reads."""
    (stage / STATE / report).replace(output / STATE / report)
    if (stage / "rejects" / removed).exists():
        (output / "rejects").mkdir(parents=True, exist_ok=True)
        (stage / "rejects" / removed).replace(output / "rejects" / removed)
    shutil.rmtree(stage, ignore_errors=True)
