"""The mcqa dataset's card: conversion per source, rejections per reason, answer types, the LLM reformulation when
there was one, and the command that reproduces it."""

from __future__ import annotations

from pathlib import Path

from curate.builders.mcqa.items import ABILITY, DATA_SOURCE, McqaResult
from curate.data_cards.cards import (
    load_snippet,
    render_card,
    reproduce_command,
    save_card,
    size_category,
    split_configs,
)

FIELDS = [
    ("`id`", "string", "item id from the source (or source name and position)"),
    ("`question`", "string",
     "the stem without its options, with an answer-format instruction where the type needs one"),
    ("`answer`", "string", "the gold option as canonical LaTeX"),
    ("`answer_type`", "string", "kind of mathematical object the answer is"),
    ("`source`", "string", "input file the item came from"),
    ("`original_options`", "list of {letter, text}", "the options as they were"),
    ("`gold_letter`", "string", "the letter of the gold option"),
    ("`data_source`", "string",
     f"`{DATA_SOURCE}`: the registered reward in `curate.rewards` (math-verify, gold first)"),
    ("`ability`", "string", f"`{ABILITY}`"),
]
REFORMULATED_FIELDS = [
    ("`rule_question`", "string", "the rule-based stem the model rewrote"),
    ("`reformulated_by`", "string", "the model that rewrote it"),
]


def mcqa_command(output: Path, parameters: dict, dedup: bool, decontam: str | None,
                 benchmarks_dir: str | Path | None) -> str:
    options = [*(("--input", i) for i in parameters["inputs"]), ("--format", parameters["format"]),
               ("--output", output), ("--limit", parameters["limit"] if parameters["limit"] >= 0 else None)]
    if reformulated := parameters.get("reformulate"):
        options += [("--reformulate", True), ("--model", reformulated["model"]),
                    ("--backend", reformulated.get("backend", "transformers")),
                    ("--endpoint-url", reformulated.get("endpoint_url") or None),
                    ("--max-tokens", reformulated.get("max_tokens"))]
    return reproduce_command("mcqa", options=options, dedup=dedup, decontam=decontam, benchmarks_dir=benchmarks_dir)


def write_mcqa_card(output: Path, result: McqaResult, parameters: dict, dedup: bool = False,
                    decontam: str | None = None, benchmarks_dir: str | Path | None = None) -> None:
    from huggingface_hub import DatasetCardData

    card_data = DatasetCardData(
        license="other", language=["en"], task_categories=["question-answering", "text-generation"],
        size_categories=[size_category(result.kept)],
        pretty_name="curate: open-answer questions from multiple choice",
        tags=["math", "reasoning", "curate", "rl", "mcqa-to-open"], configs=split_configs(["train"]),
    )
    total = result.kept + result.rejected
    per_source = ["| source | items | kept | rate | top rejection reasons |", "|---|---|---|---|---|"]
    for source, counts in sorted(result.by_source.items()):
        n = counts.get("kept", 0) + counts.get("rejected", 0)
        reasons = sorted(((k, v) for k, v in counts.items() if k not in ("kept", "rejected")),
                         key=lambda kv: -kv[1])[:3]
        per_source.append(f"| {source} | {n:,} | {counts.get('kept', 0):,} | "
                          f"{100 * counts.get('kept', 0) / max(n, 1):.1f} % | "
                          + ", ".join(f"{k} {v:,}" for k, v in reasons) + " |")
    per_reason = ["| reason | items | share of input |", "|---|---|---|"]
    per_reason += [f"| {k} | {v:,} | {100 * v / max(total, 1):.1f} % |" for k, v in result.by_reason.items()]
    per_reason += ["", "Every rejected item is in `rejects/rejects.jsonl` with its id and reason."]
    types = ["| type | items |", "|---|---|"] + [f"| {k} | {v:,} |" for k, v in result.answer_types.items()]
    sections = [("Conversion per source", "\n".join(per_source)), ("Rejections per reason", "\n".join(per_reason)),
                ("Answer types", "\n".join(types))]
    if reformulated := parameters.get("reformulate"):
        sections.append(("LLM reformulation", (
            f"Every converted stem was rewritten by `{reformulated['model']}` (backend "
            f"`{reformulated.get('backend', 'transformers')}`, prompts `{reformulated['prompt_version']}`) as an "
            "open-ended question with the same final answer, or declared not convertible (N/A); a second pass of the "
            "same model judged each rewrite, and the answer the rewrite stated had to verify as the gold with "
            "math-verify. Refusals are counted above under the `reformulate_*` reasons; `rule_question` keeps the "
            "rule-based stem.")))
    card = render_card(
        card_data,
        summary=f"{result.kept:,} of {total:,} multiple-choice items ({100 * result.kept / max(total, 1):.1f} %) kept "
                "as open-answer questions.",
        method="Training on multiple choice teaches elimination instead of derivation; an item is kept only when its "
               "stem stands without the options and its gold option is a mathematical object that math-verify grades "
               f"uniquely (no distractor verifies as equivalent). Export for a trainer with `curate export {output} "
               "--to verl --output …`.",
        parameters=[(k, v) for k, v in parameters.items() if k != "reformulate"]
        + [(f"reformulate {k}", v) for k, v in (parameters.get("reformulate") or {}).items()],
        command=mcqa_command(output, parameters, dedup, decontam, benchmarks_dir),
        sections=sections,
        fields=FIELDS + (REFORMULATED_FIELDS if parameters.get("reformulate") else []),
        load=load_snippet(["train"]),
        limitations="The filter is rule-based (stem patterns and answer parsing): its precision and recall on a "
                    "hand-labeled set are printed by `bench/mcqa_precision.py`. A kept item can still have a gold "
                    "option that is wrong in the source, or a stem whose answer was meant to be rounded to the nearest "
                    "option.",
    )
    save_card(card, output)
