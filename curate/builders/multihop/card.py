"""The multihop dataset's card: the three splits, the hop-count distribution, links accepted and refused by reason,
the source problems, the cleaning reports, and the command that reproduces it."""

from __future__ import annotations

from pathlib import Path

from curate.builders.multihop.rows import ABILITY, DATA_SOURCE, SETS
from curate.builders.multihop.stats import MultihopStats
from curate.data_cards.cards import (
    load_snippet,
    render_card,
    reproduce_command,
    save_card,
    size_category,
    split_configs,
)


def _table(header: tuple[str, str], counts: dict, total: int | None = None) -> str:
    if not counts:
        return "_None._"
    lines = [f"| {header[0]} | {header[1]} |" + (" share |" if total else ""), "|---|---|" + ("---|" if total else "")]
    for key, value in counts.items():
        share = f" {100 * value / total:.1f} % |" if total else ""
        lines.append(f"| {key} | {value:,} |{share}")
    return "\n".join(lines)


def multihop_command(parameters: dict, output: Path) -> str:
    return reproduce_command("multihop", options=[
        ("--input", parameters["input"]), ("--output", output), ("--hops", parameters["hops"]),
        ("--n", parameters["n"]), ("--seed", parameters["seed"]), ("--max-ratio", parameters["max_ratio"]),
        ("--tries-per-link", parameters["tries_per_link"]), ("--question-key", parameters["text_key"]),
        ("--answer-key", parameters["answer_key"]), ("--id-key", parameters["id_key"]),
        ("--license", parameters["license"]),
        ("--split", parameters["split"] if parameters["input"].startswith("hf:") else None),
    ], dedup=parameters["dedup"], decontam=parameters["decontam"], benchmarks_dir=parameters["benchmarks_dir"])


FIELDS = [
    ("`id`", "string", "row id (`-h0`/`-h1`: half segments, `-sN`: single hops)"),
    ("`chain_id`", "string", "the chain the row comes from"),
    ("`question`", "string", "the composed problem text"),
    ("`answer`", "string", "the final answer, as a decimal number"),
    ("`data_source`", "string", f"`{DATA_SOURCE}`: the reward function that grades the final answer"),
    ("`ability`", "string", f"`{ABILITY}`"),
    ("`n_hops`", "int32", "number of problems in the row"),
    ("`hops`", "list of struct", ("per problem: `source_id`, `question` (as shown), `answer`, `replaced` (the original "
                                 "number's text the previous answer took the place of), `substituted_value`")),
]


def write_card(output: Path, parameters: dict, stats: MultihopStats, reports: dict[str, str]) -> None:
    """The family card; `reports` are the cleaning sections of the source problems (--dedup / --decontam)."""
    from huggingface_hub import DatasetCardData


    chains = stats.rows.get("full", 0)
    card_data = DatasetCardData(
        license=parameters["license"],
        language=["en"],
        task_categories=["question-answering", "text-generation"],
        size_categories=[size_category(sum(stats.rows.values()))],
        pretty_name="curate: multi-hop chained math problems",
        tags=["reasoning", "math", "multi-hop", "rl", "curate"],
        configs=split_configs(list(SETS)),
    )
    hop_counts = {f"{k} hops": v for k, v in sorted(stats.hop_counts.items())}
    ratio = parameters["max_ratio"]
    rejected_links = stats.link_proposals - stats.links_accepted
    card = render_card(
        card_data,
        summary=f"{chains:,} chains of {parameters['hops']} problems in which each problem's answer takes the place of "
                "a number in the next, so that only a solver who keeps every intermediate answer right reaches the "
                "final one.",
        method=f"Source problems came from `{parameters['input']}`. Each solution's calculator annotations "
               "(`<<48/2=24>>`) were parsed into an expression graph and re-executed exactly (rational arithmetic, no "
               "`eval`); only problems that reproduce their `#### N` answer were used. A link replaces a number "
               "written once in the next problem's text that feeds its answer, then re-executes that problem; it is "
               "accepted only if the value flows through annotated arithmetic alone (neither it nor a value computed "
               "from it takes part in arithmetic written in plain text, such as `9000(.30)=2700` or \"half of 40\", or "
               "equals another number of the problem), if the answer changes when a second value is put in, and if "
               "every intermediate value keeps its sign, stays whole where it was whole and stays within a "
               f"factor {ratio} of its original value. Every row was re-executed from its stored hops before writing.",
        parameters=[("question key" if k == "text_key" else k.replace("_", " "), v) for k, v in parameters.items()],
        command=multihop_command(parameters, output),
        sections=[
            ("Splits (ablation sets from the same chains)",
             ("| split | rows | what |\n|---|---|---|\n"
             f"| `full` | {stats.rows.get('full', 0):,} | one row per chain of k hops |\n"
             f"| `half` | {stats.rows.get('half', 0):,} | each chain cut in two: ceil(k/2) hops, then the rest "
             "starting with the chained value written as a number |\n"
             f"| `single` | {stats.rows.get('single', 0):,} | the source problems of each chain, unchanged, with their "
             "original answers |\n\n`chain_id` ties the rows of all three splits to their chain.")),
            ("Hop-count distribution (`full`)",
             (f"{_table(('hops', 'chains'), hop_counts, chains)}\n\n{stats.distinct_sources:,} distinct source "
             f"problems are used; the most used one appears in {stats.max_source_uses:,} chains.")),
            ("Links",
             (f"{stats.link_proposals:,} links were proposed (a number in another problem within a factor {ratio} of "
             f"the previous answer) and {stats.links_accepted:,} accepted: an acceptance rate of "
             f"{100 * stats.acceptance_rate:.1f} %. Rejected links, by reason (each one is in "
             "`rejects/links.jsonl`):\n\n"
             f"{_table(('reason', 'links'), dict(stats.link_rejects.most_common()), rejected_links)}\n\n"
             f"Chain attempts: {stats.chain_attempts:,}; abandoned for want of a valid link "
             "(`rejects/chains.jsonl`):\n\n"
             f"{_table(('reason', 'chains'), dict(stats.chain_rejects.most_common()))}")),
            ("Source problems",
             (f"{stats.sources_read:,} read, {stats.sources_executable:,} executable, {stats.sources_with_slots:,} "
             "with at least one number a previous answer can replace. Set aside (`rejects/sources.jsonl`):\n\n"
             f"{_table(('reason', 'problems'), dict(stats.source_rejects.most_common()))}")),
        ],
        reports=reports,
        fields=FIELDS,
        load=load_snippet(list(SETS)),
        limitations="A literal in a solution is linked to a given number or an earlier result by its value; where the "
                    "same value could be either, the number is never chosen for replacement, but a constant the solver "
                    "brought in (e.g. 2 for \"twice\") that happens to equal a given is treated as that given. The "
                    "replaced number's wording around it is kept, so a unit or a plural may read oddly with the new "
                    "value. Source problems are reused across chains.",
    )
    save_card(card, output)
