"""One item converted: the rules applied, the gold option parsed and checked unique among the options with
math-verify, the stem rewritten for an open answer (with the instruction its answer type needs); each item's whole
check bounded in time (`convert_bounded`): the sympy objects of one item's options are compared with each other and
classified, which a string-in, verdict-out worker cannot hand back."""

from __future__ import annotations

import atexit
import multiprocessing
import re
import signal
import threading
from collections.abc import Callable

from curate.builders.mcqa.answers import Answer, parse_answer, stem_subscripts, stem_variables
from curate.builders.mcqa.items import Converted, MCItem, Rejected
from curate.builders.mcqa.readers import split_inline_options
from curate.builders.mcqa.rules import (
    ASKS_TIME,
    CONSTANT_ARITHMETIC,
    FORM_ASKED,
    META_GOLD,
    MODULAR_RING,
    PAIR_DASH,
    TIME_OF_DAY,
    TOGETHER,
    rounded_reason,
    stem_reason,
    unstated_constant_reason,
)
from curate.rewards.equivalence import verify_parsed

ITEM_SECONDS = 10.0


class CheckTimeout(Exception):
    pass


# Counted things and currencies: the stem already says what is counted or paid.
UNITS_WITHOUT_INSTRUCTION = {"men", "women", "boys", "girls", "students", "persons", "people", "workers", "children",
                             "times", "ways", "units", "unit", "rs", "rs.", "rupees", "dollars", "cents", "paise",
                             "balls", "marbles", "apples", "books", "pages", "votes", "steps", "games", "matches",
                             "employees", "members", "players", "trees", "cows", "seats", "tickets", "items",
                             "revolutions", "rounds"}
INSTRUCTIONS = {
    "percentage": "Express your answer as a percentage.",
    "fraction": "Express your answer as a common fraction.",
    "radical": "Express your answer in simplest radical form.",
    "interval": "Express your answer in interval notation.",
    "set": "Give all values, separated by commas.",
    "tuple": "Express your answer as an ordered tuple.",
    "equation": "Express your answer as an equation.",
    "matrix": "Express your answer as a matrix.",
}


def rewrite_stem(stem: str, answer: Answer) -> str:
    stem, _ = split_inline_options(stem)
    stem = re.sub(r"\s*(Answer Choices|Options|Choices)\s*:.*$", "", stem, flags=re.DOTALL | re.IGNORECASE).strip()
    stem = re.sub(r"\s+([?.,])", r"\1", stem) if " ?" in stem or " ," in stem else stem
    if stem and stem[0].islower():
        stem = stem[0].upper() + stem[1:]
    extra = []
    if answer.answer_type in INSTRUCTIONS:
        instruction = INSTRUCTIONS[answer.answer_type]
        if answer.answer_type == "tuple" and len(answer.parsed[0]) == 2:
            instruction = "Express your answer as an ordered pair."
        extra.append(instruction)
    if answer.unit and answer.unit.lower() not in UNITS_WITHOUT_INSTRUCTION:
        extra.append(f"Express your answer in {answer.unit}.")
    return " ".join([stem, *extra]).strip()


def convert_item(item: MCItem) -> Converted | Rejected:
    """The open-answer item, or a rejection with its reason. Unbounded: call through `convert_bounded`."""
    reject = lambda reason: Rejected(item.id, item.source, reason)
    stem, _ = split_inline_options(item.question)
    if reason := stem_reason(stem):
        return reject(reason)
    gold_text = item.options[item.gold_letter]
    if META_GOLD.search(gold_text):
        return reject(f"gold_meta_option: {gold_text.strip()[:40]!r}")
    for letter, text in item.options.items():
        if TOGETHER.search(text) and letter != item.gold_letter \
                and not re.search(r"\bnone of (these|the above)\b", text, re.IGNORECASE):
            # "both A and B" as a distractor says A and B were written to be weighed against each other.
            return reject(f"options_meaningful_together: option {letter} {text.strip()[:30]!r}")
    if reason := unstated_constant_reason(stem, item.options):
        return reject(reason)
    for letter, text in item.options.items():
        # A stem that names the options by letter ("if A is true …") cannot stand without them.
        if re.search(rf"\b(option|choice|answer)\s*\(?{letter}\)?(?![\w])", stem, re.IGNORECASE):
            return reject(f"stem_depends_on_options: refers to option {letter}")
    if (m := TIME_OF_DAY.fullmatch(gold_text)) and (m.group("half") or ASKS_TIME.search(stem)):
        return reject(f"time_of_day: {gold_text.strip()[:20]!r} is a clock time, not a number or ratio the reward "
                      "grades")
    if PAIR_DASH.fullmatch(gold_text) and any(PAIR_DASH.fullmatch(t) for k, t in item.options.items()
                                              if k != item.gold_letter):
        # "21 - 61" answers "find the numbers", "652,000 - 628,000" a range: options so written are pairs, not
        # differences
        return reject(f"ambiguous_dash: options written as {gold_text.strip()[:30]!r} (two numbers, or their "
                      "difference)")
    variables, subscripts = stem_variables(stem), stem_subscripts(stem)
    answer = parse_answer(gold_text, variables, subscripts)
    if isinstance(answer, str):
        return reject(answer)
    if (m := FORM_ASKED.search(stem)) and CONSTANT_ARITHMETIC.fullmatch(answer.latex):
        # "2^4 \cdot 3" for a prime factorization, "200000 + 70000 + 200 + 40" for an expanded form: the reward
        # compares values, so 48, 6 \cdot 8 and 270240 would all score 1
        return reject(f"form_answer: the question asks for a form ({m.group(0)!r}) that a value checker cannot tell "
                      "apart")
    if MODULAR_RING.search(stem) and re.search(r"[a-zA-Z]", re.sub(r"\\[a-zA-Z]+", "", answer.latex)):
        # "(x + 1)(x - 4)(x - 2) in Z_7[x]": (x + 1)(x + 3)(x + 5) is the same answer and a checker over Q rejects it
        return reject(f"modular_answer: a polynomial over {MODULAR_RING.search(stem).group(0)!r}")
    if reason := rounded_reason(stem, answer):
        return reject(reason)
    for letter, text in item.options.items():
        if letter == item.gold_letter:
            continue
        other = parse_answer(text, variables, subscripts)
        if isinstance(other, Answer) and (verify_parsed(answer.parsed, other.parsed)
                                          or verify_parsed(other.parsed, answer.parsed)):
            if answer.unit and other.unit and answer.unit != other.unit:
                # "1 nm" against a gold of "1 m": the reward grades the number with or without a unit, so a solver
                # who answers the distractor with its unit scores 1
                return reject(f"not_unique: option {letter} {text.strip()[:30]!r} differs from the gold only in its "
                              "unit")
            return reject(f"not_unique: option {letter} {text.strip()[:30]!r} verifies as the gold "
                          f"{gold_text.strip()[:30]!r}")
    question = rewrite_stem(stem, answer)
    if not question:
        return reject("empty_question: nothing left once the options are removed")
    options = [{"letter": k, "text": v} for k, v in sorted(item.options.items())]
    return Converted(item.id, item.source, question, answer.latex, answer.answer_type, options, item.gold_letter)


_pool = None
_pool_lock = threading.Lock()


@atexit.register
def _close_pool() -> None:
    # Left to the garbage collector, the pool is torn down after the modules it needs at interpreter exit.
    if _pool is not None:
        _pool.terminate()


def call_bounded(fn: Callable, *args, seconds: float):
    """fn(*args) with a wall-clock limit. In a main thread: our own SIGALRM timer. Elsewhere (a
    trainer's reward thread) signals cannot be used, so the call runs in a child process that is
    killed when it overruns."""
    global _pool
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
        def on_alarm(_signum, _frame):
            raise CheckTimeout(f"over {seconds:g} s")

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            return fn(*args)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    with _pool_lock:
        if _pool is None:
            _pool = multiprocessing.get_context("spawn").Pool(1)
        pending = _pool.apply_async(fn, args)
        try:
            return pending.get(timeout=seconds)
        except multiprocessing.TimeoutError:
            _pool.terminate()
            _pool = None
            raise CheckTimeout(f"over {seconds:g} s") from None


def convert_bounded(item: MCItem | Rejected, seconds: float = ITEM_SECONDS) -> Converted | Rejected:
    if isinstance(item, Rejected):
        return item
    try:
        return call_bounded(convert_item, item, seconds=seconds)
    except CheckTimeout as error:
        return Rejected(item.id, item.source, f"verify_timeout: {error}")
    except Exception as error:  # noqa: BLE001 - a sympy failure on one item must not stop the run
        return Rejected(item.id, item.source, f"check_error: {type(error).__name__}: {str(error)[:200]}")
