"""Priming datasets (`curate priming`): Countdown problems with behavior-controlled traces, checked by a classifier.

Output layout:
    OUT/data/train-00000.parquet, OUT/data/test-00000.parquet
        SFT columns (query, completion), verl RL columns (data_source, prompt as a chat list, ability,
        reward_model{style, ground_truth{target, numbers}}, extra_info{..., format_score}) and the project's
        RL columns (id, question, answer, format_score), plus what the trace is and what was found in it.
        SFT and RL rows carry ONE prompt: `query` is the TinyZero completion prompt (ending before
        `<think>`), and `prompt` is that same text as the one user message, as TinyZero's own data has it;
        `question` is its user turn, which already asks for the <answer> format
    OUT/README.md        card: variant, acceptance rate, behavior prevalence, answer accuracy, lengths
    OUT/rejects/rejects.jsonl   every trace the behavior check refused, and every problem that could not
                                get a trace, with its reason
    OUT/.curate/parameters.json, stats.json

A trace is kept only when the classifier finds every requested behavior and none of the others; the
controls (`empty_cot`, `placeholder_cot`) must show none. Train and test never share a problem: each
unique problem (numbers as a multiset, target) is drawn once and assigned to one split by its hash.

    config   the variants a job builds and each one's PrimingConfig, presets, the problem space
    rows     the row schema, the TinyZero prompt, the completion, a problem's id and split
    traces   the think text of one problem under a variant (symbolic, empty, placeholder filler)
    judge    the LLM judge: a second reading of the behaviors, by a model
    stats    what a build kept and measured (PrimingResult, dataset_stats)
    card     the dataset card
    build    the job: claim, draw, write, classify, keep, judge, stats, card, cleaning
"""

from curate.builders.priming.build import build_priming_set, run_priming, written_traces
from curate.builders.priming.config import (
    ALL_VARIANTS,
    PROBLEM_SPACE,
    PrimingConfig,
    PrimingError,
    apply_preset,
    preset_options,
    priming_sets,
    resolve_preset,
)
from curate.builders.priming.rows import SYSTEM_PREAMBLE, tinyzero_prompt, tinyzero_query
from curate.builders.priming.stats import PrimingResult
from curate.builders.priming.traces import count_tokens, draft_trace, placeholder_text

__all__ = [
    "ALL_VARIANTS", "PROBLEM_SPACE", "SYSTEM_PREAMBLE", "PrimingConfig", "PrimingError", "PrimingResult",
    "apply_preset", "build_priming_set", "count_tokens", "draft_trace", "placeholder_text", "preset_options",
    "priming_sets", "resolve_preset", "run_priming", "tinyzero_prompt", "tinyzero_query", "written_traces",
]
