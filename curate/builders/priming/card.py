"""The priming dataset's card: the behavior check's acceptance, the LLM judge's when there was one, splits,
failures of incorrect answers, prose diversity, and the command that reproduces it."""

from __future__ import annotations

from pathlib import Path

from curate.behaviors import BEHAVIOR_NAMES
from curate.builders.priming.config import PrimingConfig
from curate.builders.priming.judge import JUDGE_DIR, VERDICTS
from curate.builders.priming.stats import PrimingResult
from curate.data_cards.cards import (
    load_snippet,
    render_card,
    reproduce_command,
    save_card,
    size_category,
    split_configs,
)
from curate.puzzles.countdown import DATA_SOURCE

FIELDS = [
    ("`query`", "string", ("the prompt, in the TinyZero completion format, ending before `<think>`; the SFT "
                           "prompt and the content of `prompt`")),
    ("`completion`", "string", "`<think>` … `</think>` then `<answer>` … `</answer>`"),
    ("`data_source`", "string", f"`{DATA_SOURCE}`: the registered reward that grades the answer"),
    ("`prompt`", "list of {role, content}", "verl prompt: `query` as the one user message (as TinyZero's data)"),
    ("`ability`", "string", "task family"),
    ("`reward_model`", "struct{style, ground_truth{target, numbers}}", "what verl passes to the reward"),
    ("`extra_info`", "struct{split, index, variant, answers, format_score}", ("verl bookkeeping; `format_score` is "
                                                                              "read by the Countdown reward")),
    ("`id`, `question`, `answer`", "string", "problem id, question, a reference solution"),
    ("`completion_answer`, `answer_correct`", "string, bool", ("the expression the completion gives, and whether it "
                                                              "reaches the target")),
    ("`numbers`, `target`", "list of int64, int64", "the problem"),
    ("`format_score`", "float64", "reward of a well-formed wrong equation (0, or TinyZero's 0.1)"),
    ("`variant`, `answers`, `requested_behaviors`", "string, string, list of string",
     "what the trace was asked to show"),
    ("`verification`, `backtracking`, `subgoal_setting`, `backward_chaining`", "int32",
     "sentences the classifier found showing each behavior in the trace"),
    ("`classifier`, `writer`, `strategy`, `dead_ends`", "string, string, string, int32", ("who checked and wrote the "
                                                                                         "trace, and how it searched")),
    ("`failure`, `voice`", "string, string",
     "why an incorrect answer is wrong (null when correct), the narrator voice"),
    ("`think_chars`, `think_tokens`", "int64", "length of the chain of thought (tokens: null without --tokenizer)"),
]


def priming_command(config: PrimingConfig, output: Path, dedup: bool, decontam: str | None,
                    benchmarks_dir: str | Path | None) -> str:
    options = [
        ("--variant", config.variant), ("--answers", config.answers), ("--n", config.n), ("--test-n", config.test_n),
        ("--seed", config.seed), ("--writer", config.writer), ("--classifier", config.classifier),
        ("--numbers", ",".join(map(str, config.sizes))),
        ("--number-range", f"{config.number_range[0]},{config.number_range[1]}"),
        ("--target-range", f"{config.target_range[0]},{config.target_range[1]}"),
        ("--max-dead-ends", config.max_dead_ends), ("--output", output),
        ("--fractional-division", not config.integer_division),
        ("--format-score", f"{config.format_score:g}" if config.format_score else None),
        ("--tokenizer", config.tokenizer or None),
        ("--placeholder-for", config.placeholder_for if config.variant == "placeholder_cot" else None),
    ]
    if config.writer == "llm":
        llm = config.llm or {}
        options += [("--model", str(llm.get("model"))), ("--backend", str(llm.get("backend", "transformers"))),
                    ("--endpoint-url", llm.get("endpoint_url") or None),
                    ("--temperature", str(llm["temperature"]) if "temperature" in llm else None),
                    ("--max-trace-tokens", str(llm["max_tokens"]) if "max_tokens" in llm else None)]
    if config.judge is not None:
        options.append(("--judge-model", str(config.judge["model"])))
        if config.writer != "llm":  # the writer's options above already name the shared server
            options += [("--backend", str(config.judge.get("backend", "transformers"))),
                        ("--endpoint-url", config.judge.get("endpoint_url") or None)]
    return reproduce_command("priming", options=options, dedup=dedup, decontam=decontam, benchmarks_dir=benchmarks_dir)


def judge_section(judge: dict, config: PrimingConfig) -> str:
    """The card's LLM-judge section: acceptance under the judge per group of traces, and its agreement with the
    classifier, from the verdict rows."""
    def rate(part):
        return f"{100 * part['accepted'] / part['judged']:.1f} %" if part["judged"] else "n/a"

    table = ["| traces | count | judged | accepted by the judge | acceptance | parse failures | request failures |",
             "|---|---|---|---|---|---|---|"]
    for key, label in (("all", "all written"), ("kept", "kept by the classifier"),
                       ("refused", "refused by the classifier")):
        part = judge[key]
        table.append(f"| {label} | {part['traces']:,} | {part['judged']:,} | {part['accepted']:,} | {rate(part)} | "
                     f"{part['parse_failures']:,} | {part['request_failures']:,} |")
    agreement = judge["agreement"]
    return (f"`{judge['model']}` read every trace the build wrote, with the puzzle's numbers and target, and counted "
            "the four behaviors; a trace is accepted when it shows exactly the requested ones "
            f"({', '.join(sorted(b.value for b in config.requested)) or 'none'}). The judge reports and does not "
            "choose rows; a reply it could not read leaves the trace unjudged.\n\n" + "\n".join(table)
            + "\n\nAgreement over judged traces: both accept "
            f"{agreement['both_accept']:,}, only the classifier {agreement['only_classifier']:,}, only the judge "
            f"{agreement['only_judge']:,}, neither {agreement['neither']:,}. One verdict per trace is in "
            f"`{JUDGE_DIR}/{VERDICTS}` (counted before any --dedup / --decontam).")


def write_priming_card(output: Path, config: PrimingConfig, classifier: str, result: PrimingResult, dedup: bool = False,
                       decontam: str | None = None, benchmarks_dir: str | Path | None = None) -> None:
    from huggingface_hub import DatasetCardData


    stats = result.stats
    requested = sorted(b.value for b in config.requested)
    forbidden = [b for b in BEHAVIOR_NAMES if b not in requested]
    splits = list(stats["splits"])
    card_data = DatasetCardData(
        license="apache-2.0",
        language=["en"],
        task_categories=["text-generation"],
        size_categories=[size_category(stats["kept"])],
        pretty_name=f"curate priming: countdown {config.variant} ({config.answers} answers)",
        tags=["reasoning", "cognitive-behaviors", "countdown", "priming", "curate", *requested],
        configs=split_configs(splits),
    )
    rejected = "".join(f"\n| {k} | {v:,} |" for k, v in stats["rejected"].items())
    acceptance = (f"{stats['kept']:,} of {stats['attempted']:,} traces kept "
                  f"(acceptance rate {100 * stats['acceptance_rate']:.1f} % under `{classifier}`). The phrase banks "
                  "were not written from this classifier's cue lists, so the rate measures agreement between two "
                  "independent readings of the behaviors.")
    if rejected:
        acceptance += f"\n\n| reason | traces |\n|---|---|{rejected}\n\nThe refused traces are in `rejects/`."
    split_table = ["| split | rows | answer accuracy | think chars mean / median / p90 / max | "
                   "think tokens mean / max | " + " | ".join(BEHAVIOR_NAMES) + " |",
                   "|---|---|---|---|---|" + "---|" * len(BEHAVIOR_NAMES)]
    for split, s in stats["splits"].items():
        c, t = s["think_chars"], s["think_tokens"]
        tokens = f"{t['mean']:.0f} / {t['max']}" if t["mean"] is not None else "n/a (no --tokenizer)"
        split_table.append(" | ".join([
            f"| {split}", f"{s['rows']:,}", f"{100 * s['answer_accuracy']:.1f} %",
            f"{c['mean']:.0f} / {c['median']:.0f} / {c['p90']:.0f} / {c['max']}", tokens,
            *[f"{100 * s['prevalence'][b]:.1f} %" for b in BEHAVIOR_NAMES]]) + " |")
    split_table.append(f"\nProblems in both splits: {stats.get('problems_in_both_splits', 0)}.")
    failure_table = ("| failure | rows |\n|---|---|"
                     + "".join(f"\n| {k} | {v:,} |" for k, v in stats.get("failures", {}).items())
                     + "\n\nFailures: near_miss (the search budget ran out; the nearest result is answered), carry / "
                     "borrow / swapped_digits (one slipped equation, never approved by a check), number_used_twice, "
                     "number_left_out. Every other equation in a trace is true.")
    diversity = ("Distinct word 4-grams over all 4-grams (numbers masked), per narrator voice:\n\n"
                 "| voice | rate |\n|---|---|"
                 + "".join(f"\n| {k} | {v:.3f} |" for k, v in stats.get("distinct_4gram_rate", {}).items()
                           if v is not None))
    writer_description = {
        "empty_cot": "each completion has an empty chain of thought (`<think> </think>`).",
        "placeholder_cot": f"each chain of thought is filler with the token count (under `{config.tokenizer}`) of a "
                           f"`{config.placeholder_for}` trace for the same problem.",
    }.get(config.variant, "each trace narrates a search (depth-first, best-first, or backward from the target when "
                          "backward chaining is on) in one of several narrator voices, with the chosen behaviors "
                          "switched on and the others off.")
    if config.writer == "llm" and config.variant != "empty_cot":
        writer_description = (
            f"the teacher model `{(config.llm or {}).get('model')}` wrote each trace under a system prompt asking for "
            "the chosen behaviors and forbidding the others; replies without a readable `<think>`/`<answer>`, or whose "
            f"answer was not {'correct' if config.answers == 'correct' else 'a well-formed wrong expression'} by the "
            "Countdown verifier, were refused. "
            + ("That trace's token count then set the length of filler that replaced it. "
               if config.variant == "placeholder_cot" else ""))
    sections = [("Behavior check", acceptance), ("Splits", "\n".join(split_table)),
                ("Incorrect answers by failure", failure_table), ("Prose diversity", diversity)]
    if "judge" in stats:
        sections.insert(1, ("LLM judge", judge_section(stats["judge"], config)))
    card = render_card(
        card_data,
        summary=f"{stats['kept']:,} Countdown priming examples, variant `{config.variant}`, {config.answers} answers.",
        method=f"Countdown problems of {' or '.join(map(str, config.sizes))} numbers in {config.number_range[0]}-"
               f"{config.number_range[1]} with targets in {config.target_range[0]}-{config.target_range[1]} were "
               f"generated solvable by construction (confirmed by an exhaustive solver); "
               f"{writer_description} Every trace was then classified with `{classifier}` and kept only when it showed "
               f"{', '.join(requested) or 'no behavior'} and none of {', '.join(forbidden) or 'nothing'}. Every row "
               f"carries `format_score` {config.format_score:g} for the Countdown reward (the score of a well-formed "
               "wrong equation; TinyZero's runs use 0.1), and one prompt, the TinyZero completion prompt, for SFT and "
               "RL.",
        parameters=[(k, v) for k, v in vars(config).items()],
        command=priming_command(config, output, dedup, decontam, benchmarks_dir),
        sections=sections,
        fields=FIELDS,
        load=load_snippet(splits),
        limitations=f"Behavior labels come from `{classifier}`, an automatic classifier: a trace it accepts can still "
                    "lack a behavior in a form it does not recognise, and symbolic traces are templated text, more "
                    "regular than a model's, even across its narrator voices. Incorrect answers come from the natural "
                    "failures counted above.",
    )
    save_card(card, output)
