"""The dataset cards of both sets and of their rewrites: the matching, the length histograms, the domain mix, the
behavior prevalence, the rejects, and the `curate cpt` command that reproduces the build."""

from __future__ import annotations

import itertools
from pathlib import Path

import duckdb

from curate.builders.cpt.common import VARIANTS
from curate.builders.cpt.judge import SolutionJudgeOptions
from curate.builders.cpt.matching import LENGTH_EDGES, MatchReport
from curate.builders.cpt.rewrite import RewriteOptions, RewriteResult
from curate.data_cards.cards import (
    rejects_table,
    render_card,
    reproduce_command,
    save_card,
    size_category,
    split_configs,
    stats_table,
)
from curate.data_cards.plots import plot_length_histograms
from curate.pipelines.query import behavior_stats, parquet_files
from curate.pipelines.readers import InputSpec


def _length_histogram(connection, files: list[str]) -> list[tuple[str, int, int]]:
    cases = " ".join(f"WHEN n_tokens < {hi} THEN '{lo}-{hi - 1}'" for lo, hi in itertools.pairwise(LENGTH_EDGES))
    order = " ".join(f"WHEN n_tokens < {hi} THEN {i}" for i, hi in enumerate(LENGTH_EDGES[1:]))
    return connection.sql(
        f"SELECT CASE {cases} ELSE '>={LENGTH_EDGES[-1]}' END AS bucket, count(*), sum(n_tokens) FROM read_parquet($f) "
        f"GROUP BY bucket, CASE {order} ELSE {len(LENGTH_EDGES)} END "
        f"ORDER BY CASE {order} ELSE {len(LENGTH_EDGES)} END",
        params={"f": files}).fetchall()


def _plot_lengths(output: Path, datasets: dict[str, Path], tokenizer: str) -> str:
    with duckdb.connect() as connection:
        lengths = {name: [r[0] for r in connection.sql("SELECT n_tokens FROM read_parquet($f)",
                                                       params={"f": parquet_files(folder)}).fetchall()]
                   for name, folder in datasets.items() if parquet_files(folder)}
    return plot_length_histograms(lengths, output / "lengths.png",
                                  f"tokens per document ({Path(tokenizer).name})").name


def _length_matching_row(parameters: dict, report: MatchReport) -> str:
    mode = parameters.get("length_match", "none")
    domain = parameters.get("domain_column") or parameters.get("domain_key") or "none"
    strata = f"strata of enriched length quantiles {report.length_edges} x domain (`{domain}`)"
    if mode == "none":
        return f"| length matching | `none`: {strata} |"
    if mode == "best":
        return (f"| length matching | `best`: both sets at the full budget, filled per length stratum (shared length "
                f"quantiles of both pools, {report.length_edges} tokens) to token targets as alike as both pools "
                f"allow; the two pools share {report.shared_tokens or 0:,} tokens stratum by stratum, the rest comes "
                f"from the strata nearest the other set's (KS of the targets {report.target_ks or 0:.4f}); minimized "
                f"strata follow the enriched domain mix (`{domain}`) |")
    chars = parameters["pools"].get("length_range_chars")
    removed = parameters.get("length_removed") or {}
    text = (f"| length matching | `{mode}`: both pools cut to their common length range "
            f"({chars[0]:,}-{chars[1]:,} characters, each pool's {parameters['length_trim']:g}-"
            f"{1 - parameters['length_trim']:g} quantiles intersected; "
            if chars else f"| length matching | `{mode}`: (")
    text += (f"then {report.length_range[0]:,}-{report.length_range[1]:,} tokens), "
             if report.length_range else "no token range), ")
    text += (f"{removed.get('enriched', 0):,} enriched and {removed.get('minimized', 0):,} minimized candidates "
             "removed; ")
    if mode == "strict" and report.length_weights:
        text += "both sets filled to the per-bin token shares both pools can supply " \
                f"({', '.join(f'{w:.2f}' for w in report.length_weights)}); "
    return text + strata + " |"


def cpt_command(parameters: dict, spec: InputSpec, output: Path, rewrite: RewriteOptions | None,
                solution_judge: SolutionJudgeOptions | None = None) -> str:
    """`curate cpt` with every option this build used (tags by absolute path, as the card records them)."""
    selection = parameters["selection"]
    options = [
        ("--tags", parameters["tags"]), ("--texts", spec.path), ("--tokens", parameters["budget"]),
        ("--tokenizer", parameters["tokenizer"]), ("--output", output),
        ("--behaviors", ",".join(selection["behaviors"])),
        ("--min-behaviors", selection["min_behaviors"]), ("--min-count", selection["min_count"]),
        ("--seed", selection["seed"]), ("--tolerance", parameters["tolerance"]),
        ("--length-bins", parameters["length_bins"]), ("--length-match", parameters["length_match"]),
        ("--length-trim", parameters["length_trim"]), ("--oversample", parameters["oversample"]),
        ("--text-key", spec.text_key), ("--id-key", spec.id_key), ("--pack-length", parameters["pack_length"]),
        ("--pack-format", parameters["pack_format"]), ("--license", parameters["license"]),
        ("--require-solution", bool(parameters.get("require_solution"))),
        ("--solution-judge", parameters.get("require_solution") or None),
        ("--split", spec.split if spec.is_hub else None), ("--domain-key", parameters["domain_key"] or None),
    ]
    if rewrite is not None:
        options += [("--rewrite", True), ("--model", rewrite.model), ("--backend", rewrite.backend),
                    ("--max-doc-tokens", rewrite.max_doc_tokens), ("--max-new-tokens", rewrite.max_new_tokens),
                    ("--rewrite-oversample", parameters["rewrite_oversample"]),
                    ("--endpoint-url", rewrite.endpoint_url or None)]
    elif solution_judge is not None:  # the judge's server, when no rewrite names it
        options += [("--model", solution_judge.model), ("--backend", solution_judge.backend),
                    ("--max-doc-tokens", solution_judge.max_doc_tokens),
                    ("--endpoint-url", solution_judge.endpoint_url or None)]
    return reproduce_command("cpt", options=options, dedup=parameters["dedup"], decontam=parameters["decontam"],
                             benchmarks_dir=parameters["benchmarks_dir"])


CPT_FIELDS = [
    ("`id`", "string", "document id in the corpus"),
    ("`text`", "string", "the document, unchanged"),
    ("`n_tokens`", "int64", "tokens of `text` under the named tokenizer, no special tokens"),
    ("`n_chars`", "int64", "characters of `text`"),
    ("`domain`", "string, nullable", "the stratum the length matching balanced on (null without a domain key)"),
    ("`verification`, `backtracking`, `subgoal_setting`, `backward_chaining`", "int32",
     "how many sentences the classifier found showing each behavior"),
    ("`classifier`, `model`, `prompt_version`", "string",
     "what produced the counts (model and prompt: LLM classifiers)"),
    ("`error`", "string", "always null here: documents the classifier could not label are in neither set"),
]
REWRITE_FIELDS = [
    ("`id`", "string", "the source document's id"),
    ("`question`, `thoughts`, `answer`", "string", "the three parts of the rewrite"),
    ("`completion`", "string", "`thoughts` and `answer` in the SFT completion format"),
    ("`text`", "string", "question, thoughts and answer as one CPT document"),
    ("`n_tokens`", "int64", "tokens of `text` under the named tokenizer"),
    ("`source_variant`", "string", "`enriched` or `minimized`"),
    ("`model`, `prompt_version`", "string", "who rewrote it, with which prompts"),
    ("`truncated_source`", "bool", "the source was cut to the model's document budget before rewriting"),
]
CPT_LOAD = ('from datasets import load_dataset\n'
            'ds = load_dataset("parquet", data_files={"train": "data/train-*.parquet"})')


def _matching_table(parameters: dict, report: MatchReport) -> str:
    pools = parameters["pools"]
    short = report.strata_short
    return "\n".join([
        "| measure | value |", "|---|---|",
        _length_matching_row(parameters, report),
        f"| two-sample KS statistic (token lengths, enriched vs minimized) | {report.ks_statistic:.4f} |",
        (f"| domain x length strata the minimized pool could not fill (filled from the same length bin) | "
         f"{len(short)} of {report.strata}{': ' + ', '.join(short[:8]) if short else ''}"
         f"{' ...' if len(short) > 8 else ''} |"),
        (f"| candidates (enriched / minimized / neither / ambiguous ids) | {pools.get('enriched', 0):,} / "
         f"{pools.get('minimized', 0):,} / {pools.get('neither', 0):,} / {pools.get('ambiguous_ids', 0):,} |"),
        (f"| enriched / minimized | {report.enriched_documents:,} documents, {report.enriched_tokens:,} tokens / "
         f"{report.minimized_documents:,} documents, {report.minimized_tokens:,} tokens |"),
        *([(f"| --require-solution ({parameters['solutions']['judge']}: `{parameters['solutions']['version']}`"
            + (f", `{parameters['solutions']['model']}`" if parameters["solutions"].get("model") else "")
            + "): documents kept / rejected per pool | "
            + " / ".join(f"{v} {parameters['solutions']['kept'].get(v, 0):,} kept, "
                         + (", ".join(f"{n:,} {r}" for r, n in parameters["solutions"]["rejected"].get(v, {}).items())
                            or "0 rejected") for v in VARIANTS) + " |")]
          if parameters.get("solutions") else []),
        *([(f"| share of each pool used (tokens of the set / tokens of the candidates matched from) | enriched "
            f"{100 * report.pool_used['enriched']:.1f} % of {report.pool_tokens['enriched']:,} tokens "
            f"({report.pool_documents['enriched']:,} documents) / minimized "
            f"{100 * report.pool_used['minimized']:.1f} % of {report.pool_tokens['minimized']:,} tokens "
            f"({report.pool_documents['minimized']:,} documents) |")]
          if report.pool_used else []),
    ])


def length_histogram_table(report: MatchReport) -> str:
    """Documents per length bucket in both candidate pools and both sets: where the sets follow the pools and where
    the matching had to leave them."""
    columns = ("enriched_pool", "enriched", "minimized_pool", "minimized")
    if not all(c in report.length_histogram for c in columns):
        return "(not recorded)"
    labels = [f"{lo}-{hi - 1}" for lo, hi in itertools.pairwise(LENGTH_EDGES)] + [f">={LENGTH_EDGES[-1]}"]
    rows = [f"| {label} | " + " | ".join(f"{report.length_histogram[c][i]:,}" for c in columns) + " |"
            for i, label in enumerate(labels) if any(report.length_histogram[c][i] for c in columns)]
    return ("Documents per token-length bucket:\n\n| tokens per document | enriched pool | enriched set | "
            "minimized pool | minimized set |\n|---|---|---|---|---|\n" + "\n".join(rows))


def write_cpt_card(output: Path, variant: str, parameters: dict, report: MatchReport, tags: Path,
                   rejects: dict[str, int]) -> None:
    from huggingface_hub import DatasetCardData

    data = output / "data"
    files = parquet_files(data)
    selection = parameters["selection"]
    with duckdb.connect() as connection:
        documents, tokens, characters = connection.sql(
            "SELECT count(*), coalesce(sum(n_tokens), 0), coalesce(sum(n_chars), 0) FROM read_parquet($f)",
            params={"f": files}).fetchall()[0]
        histogram = _length_histogram(connection, files)
        domains = connection.sql("SELECT coalesce(domain, '-'), count(*), sum(n_tokens) FROM read_parquet($f) "
                                 "GROUP BY 1 ORDER BY 3 DESC", params={"f": files}).fetchall()
    plot = _plot_lengths(output, {v: output.parent / v / "data" for v in VARIANTS}, parameters["tokenizer"])
    behaviors = ", ".join(selection["behaviors"])
    rule = (f"at least {selection['min_behaviors']} of {behaviors}, each counted at least {selection['min_count']} "
            "time(s)" if variant == "enriched" else f"none of {behaviors}")
    card_data = DatasetCardData(
        license=parameters["license"], language=["en"], task_categories=["text-generation"],
        size_categories=[size_category(documents)], pretty_name=f"curate CPT: behavior-{variant}",
        tags=["reasoning", "cognitive-behaviors", "curate", "continued-pretraining", variant],
        configs=split_configs(["train"]),
    )
    partner = "minimized" if variant == "enriched" else "enriched"
    partner_tokens = report.minimized_tokens if variant == "enriched" else report.enriched_tokens
    card = render_card(
        card_data,
        summary=f"{documents:,} documents, {tokens:,} tokens ({Path(parameters['tokenizer']).name} tokenizer, no "
                f"special tokens), {characters:,} characters: documents with {rule}. The matched `{partner}` set has "
                f"{partner_tokens:,} tokens.",
        method=f"Documents tagged by `{parameters['classifier']}` were split by a DuckDB query into behavior-enriched "
               "and behavior-minimized candidate pools (seeded random order, no id in both), counted in tokens, and "
               "drawn into two sets at one token budget with matched length distributions.",
        parameters=[("corpus", parameters["texts"]), ("text key", parameters["text_key"]), ("tags", parameters["tags"]),
                    ("classifier", parameters["classifier"]), ("rule", selection[f"{variant}_rule"]),
                    ("seed", f"{selection['seed']} (documents drawn in md5(id:seed) order, not corpus order)"),
                    ("token budget", f"{report.budget:,} (tolerance {100 * report.tolerance:g} %)"),
                    ("tokenizer", parameters["tokenizer"]), ("length match", parameters["length_match"]),
                    ("length trim", parameters["length_trim"]), ("length bins", parameters["length_bins"]),
                    ("domain key", parameters["domain_key"]), ("oversample", parameters["oversample"]),
                    ("dedup / decontam", f"{parameters['dedup']} / {parameters['decontam'] or 'no'}")],
        command=parameters["command"],
        sections=[
            ("Matching", _matching_table(parameters, report)),
            ("Length histograms, pools and sets", length_histogram_table(report)),
            ("Length distribution", "| tokens per document | documents | tokens |\n|---|---|---|\n"
             + "\n".join(f"| {b} | {n:,} | {t:,} |" for b, n, t in histogram)),
            ("Domain mix", "| domain | documents | tokens |\n|---|---|---|\n"
             + "\n".join(f"| {d} | {n:,} | {t:,} |" for d, n, t in domains)),
            ("Behavior prevalence", (f"After selection:\n\n{stats_table(behavior_stats(data))}\n\n"
             f"Before selection (all tagged documents):\n\n{stats_table(behavior_stats(tags))}")),
            ("Rejected records", rejects_table(rejects)),
        ],
        plots=[("token lengths of both sets", plot)],
        fields=CPT_FIELDS,
        load=CPT_LOAD,
        limitations="Counts come from an automatic classifier and carry its errors. Length matching is by strata, so "
                    "the two distributions agree up to the KS statistic above, not exactly. With `best` (the default), "
                    "where the two pools share too little length mass for the budget the sets differ in length by up "
                    "to that KS statistic; it is reported, not hidden. With `strict` or `range` length matching, "
                    "documents outside the two pools' common length range (counted above) are in neither set: the "
                    "enriched set then under-represents the longest behavior-rich documents, by design, so that length "
                    "does not confound the comparison.",
    )
    save_card(card, output)


def _rematch_table(result: RewriteResult, parameters: dict) -> str:
    matched = parameters.get("matched_tokens") or {}
    rows = []
    for v in VARIANTS:
        source = result.sources.get(v, {})
        rows.append(f"| {v} | {matched.get(v, 0):,} | {source.get('documents', 0):,} ({source.get('from_set', 0):,} "
                    f"from the set, {source.get('documents', 0) - source.get('from_set', 0):,} more of its pool), "
                    f"{source.get('source_tokens', 0):,} tokens | {result.tokens_before.get(v, 0):,} | "
                    f"{result.tokens.get(v, 0):,} |")
    return (f"{result.rematch_note or 'not re-matched'}"
            + (f"; length KS after the re-match {result.rematch_ks:.4f}" if result.rematch_ks is not None else "")
            + f". Rewritten in {result.rounds} round(s), the first with --rewrite-oversample "
              f"{parameters.get('rewrite_oversample')} times the budget in source tokens."
            + f"\n\n| set | source set tokens (budget {parameters['budget']:,}) | documents rewritten | "
              "all kept rewrites | after the re-match |\n|---|---|---|---|---|\n" + "\n".join(rows))


def write_rewrite_card(output: Path, variant: str, result: RewriteResult, options: RewriteOptions,
                       parameters: dict) -> None:
    from huggingface_hub import DatasetCardData

    kept, dropped = result.kept[variant], result.dropped[variant]
    card_data = DatasetCardData(
        license=parameters["license"], language=["en"], task_categories=["text-generation"],
        size_categories=[size_category(kept)],
        pretty_name=f"curate CPT: {variant}, rewritten as question / thoughts / answer",
        tags=["reasoning", "curate", "continued-pretraining", variant, "rewrite"], configs=split_configs(["train"]),
    )
    style = ("first-person thoughts that keep the author's checks, dead ends and subgoals" if variant == "enriched"
             else "plain numbered steps")
    card = render_card(
        card_data,
        summary=f"{kept:,} documents of `../{variant}`'s pool rewritten as question / thoughts / answer, "
                f"{result.tokens[variant]:,} tokens of `text` ({Path(parameters['tokenizer']).name} tokenizer).",
        method=f"Each document was rewritten by `{options.model}` ({options.backend}) with prompt "
               f"`{result.prompt_version}` (thoughts: {style}) at temperature 0; every row keeps its source `id`.",
        parameters=[("model", options.model), ("backend", options.backend), ("prompt version", result.prompt_version),
                    ("max doc tokens", options.max_doc_tokens), ("max new tokens", options.max_new_tokens),
                    ("tokenizer", parameters["tokenizer"]), ("source", f"../{variant}")],
        command=parameters["command"],
        sections=[("Dropped rewrites", f"{sum(dropped.values()):,} dropped (kept with the raw model output in "
                   "`rejects/rewrite.jsonl`):\n\n| reason | rows |\n|---|---|\n"
                   + ("\n".join(f"| {k} | {v:,} |" for k, v in dropped.items()) or "| (none) | 0 |")),
                  ("Token budgets before and after the re-match", _rematch_table(result, parameters))],
        fields=REWRITE_FIELDS,
        load=CPT_LOAD,
        limitations=f"Documents were cut to {options.max_doc_tokens:,} model tokens at a line break before rewriting, "
                    f"and generation was limited to {options.max_new_tokens:,} tokens. Token totals of the two "
                    "rewritten sets are re-matched at the budget where both sides kept rewrites enough (see above; "
                    "rewrites of more documents of the same pool than the set held make up for rewrites shorter than "
                    "their sources, so a rewritten set is not the rewrite of exactly its source set), and below it "
                    "where the pool ran out. The rewriting model may drop or invent steps; nothing checks the rewrite "
                    "against its source beyond its form.",
    )
    save_card(card, output)
