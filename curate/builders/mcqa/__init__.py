"""Multiple choice -> open answer (`curate mcqa`).

Training on multiple choice teaches elimination instead of derivation. This package keeps only the items whose stem
stands without its options and whose gold option is a mathematical object that a checker (math-verify) can grade
uniquely, rewrites the stem for an open answer, and writes the rest to rejects with the reason.

    items        what an item is and becomes (MCItem, Rejected, Converted, McqaResult)
    readers      the input layouts (AQuA, MMLU CSV, JSON, ARC, Alpaca), one item or rejection per record
    rules        does the stem stand without its options; is the gold a value a checker grades
    answers      an option's text as LaTeX that math-verify parses, and its answer type
    convert      one item converted and its stem rewritten, bounded in time
    reformulate  --reformulate: the LLM rewrite and judge of the converted stems
    card         the dataset card
    build        the job: check, claim, convert, write, card, cleaning
"""

from curate.builders.mcqa.answers import Answer, normalize_option, parse_answer, stem_subscripts, stem_variables
from curate.builders.mcqa.build import check_mcqa, mcqa, output_identity, run_mcqa
from curate.builders.mcqa.convert import convert_bounded, convert_item
from curate.builders.mcqa.items import Converted, FormatError, MCItem, McqaResult, Rejected, reason_code
from curate.builders.mcqa.readers import detect_format, input_files, read_items
from curate.builders.mcqa.rules import stem_reason

__all__ = [
    "Answer", "Converted", "FormatError", "MCItem", "McqaResult", "Rejected", "check_mcqa", "convert_bounded",
    "convert_item", "detect_format", "input_files", "mcqa", "normalize_option", "output_identity", "parse_answer",
    "read_items", "reason_code", "run_mcqa", "stem_reason", "stem_subscripts", "stem_variables",
]
