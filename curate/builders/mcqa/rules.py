"""The rules an item must pass to stand as an open-answer question: does the stem stand without its options (it
asks something, names no option, needs no rounding nor an unstated constant), and is the gold option a value a checker
grades rather than a pointer at other options, a clock time, a written form or a pair."""

from __future__ import annotations

import re

from curate.builders.mcqa.answers import Answer

STEM_RULES: list[tuple[str, re.Pattern]] = [
    ("stem_depends_on_options", re.compile(
        r"\b(which|what)\s+(one\s+)?(of|among)\s+(the|these|those)\b|\bwhich\s+(one\s+)?of\b|\bamong the following\b"
        r"|\bof the following\b|\bthe following (is|are|statements?|could|would|must|best|represents?)\b"
        r"|\b(all|none|each) of the following\b|\bwhich statements?\b|\bwhich (one|choice|option|answer)\b",
        re.IGNORECASE)),
    ("stem_depends_on_options", re.compile(
        r"\b(options?|choices?|answers?)\s*\(?[A-E]\)?\s*(and|or|,)|\b(option|choice)s?\s+\(?[A-E]\)?\b"
        r"|\(\s*[A-E]\s*\)\s*(and|or)\s*\(\s*[A-E]\s*\)"
        r"|\b(given|above|below|listed)\s+(options|choices|answers)\b|\b(options|choices) (above|below|given)\b",
        re.IGNORECASE)),
    ("stem_depends_on_options", re.compile(
        r"\bEXCEPT\b|\bexcept\s*(:|\?|$)|\bis not true\b|\bis false\b|\btrue or false\b", re.IGNORECASE)),
    ("stem_depends_on_options", re.compile(
        r"(^|[.?!:;,\n]\s*|\b(then|so|and)\s+)which\s+(?!is\b|are\b|was\b|were\b|has\b|have\b)|(^|[.?!:;\n]\s*)which\b"
        r"|\bmost likely\b|\bbest (describes?|explains?|represents?|supported|supports)\b"
        r"|\b(could|might|can|may) be\b\s*(\?|:|$)|\bcould\s+(be|equal)\b", re.IGNORECASE)),
    ("paired_statements", re.compile(
        r"Statement\s*1\s*\|?|\b(I|II|III)\.\s|\bI\s+only\b|\bII\s+and\s+III\b", re.DOTALL)),
]
APPROXIMATE = re.compile(
    r"\b(approximately|approximate|approx\.?|closest to|nearest to|roughly|estimated?|about how)\b", re.IGNORECASE)
STATED_PRECISION = re.compile(
    r"nearest\s+(whole|integer|tenth|hundredth|thousandth|cent|dollar|percent|degree|\w+\s+place)|decimal places?"
    r"|significant (figures|digits)", re.IGNORECASE)
META_GOLD = re.compile(
    r"^\s*(all|none|both|neither)\s+(of\s+)?(the\s+)?(above|these|them|those)\b|^\s*none\s*$|\bcan ?not be determined\b"
    r"|\bcannot be determined\b|\bdata (inadequate|insufficient)\b|\bnot enough information\b"
    r"|\binsufficient (data|information)\b"
    r"|\bmore than one\b|^\s*([A-E]|I{1,3}|IV)(\s*(,|and|&|or)\s*([A-E]|I{1,3}|IV))+\s*(only)?\s*$"
    r"|^\s*(I{1,3}|IV)\s+only\s*$", re.IGNORECASE)


# A stem that asks nothing: no question mark and no instruction ("A curve is given parametrically by the
# equations"), usually cut off in the source or meant to be completed by an option.
ASKS = re.compile(
    r"\?|\b(what|how|which|who|whom|whose|when|where|why|find|calculate|compute|determine|evaluate|solve|simplify|"
    r"give|express|estimate|write|convert|factor|factorise|factorize|expand|round|state|name|identify|list|show|prove|"
    r"derive|rationali[sz]e|add|subtract|multiply|divide)\b", re.IGNORECASE)
# "... the length of the garden is :" asks for the value it names (a completion stem), unlike a sentence cut off.
COMPLETION = re.compile(
    r"\b(is|are|was|were|be|equals?|equal to|becomes?|amounts? to|costs?)\s*[:\-.\s]*$", re.IGNORECASE)
ENDS_SENTENCE = re.compile(r"[.?!)\]}$\"'”’]\s*$")
# Motion under gravity with no value for g: the gold then encodes the writer's choice (9.8 or 10 m/s^2).
GRAVITY_MOTION = re.compile(
    r"\b(dropped|falls?|falling|fell|thrown|projectile|free[- ]fall|freely|gravity|gravitational acceleration|"
    r"vertically upwards?|pendulum|inclined plane|incline)\b", re.IGNORECASE)
# Found in the read sample (bench/mcqa_read_sample.jsonl): a kicked ball's flight time, a motor lifting a mass, an
# accelerating elevator's apparent weight, the share of a floating body weighed in newtons all use the writer's g.
# Narrow on purpose: an escalator's 'staircase elevator', people's weight in an elevator, a boat floating on a lake
# (density alone) and a steamer's float need no g.
GRAVITY_FORCE = re.compile(
    r"\bkicked\b|\blaunch(?:ed)? (?:angle|speed|velocity)\b|\blift(?:s|ing|ed)?\b[^.?!]*\b(?:kg|kilograms?)\b"
    r"|\belevator\b[^.?!]*\baccelerat|\bapparent weight\b|\bfloat(?:s|ing)?\b(?=.*\d\s*N\b)|\d\s*N\b(?=.*\bfloat)",
    re.IGNORECASE | re.DOTALL)
GRAVITY_GIVEN = re.compile(
    r"\bg\s*=|9\.8|\b10\s*m\s*/\s*s(\^?2|²)|acceleration (due to|of) gravity (is|of|=|as)|\btake g\b", re.IGNORECASE)
# Questions about how a number is written, not its value.
FORM_ASKED = re.compile(
    r"\b(expanded|standard|word|exponential|exponent|factored|scientific) (form|notation)\b|\bprime factori[sz]ation\b"
    r"|\bfactori[sz]e\b|\busing (exponents|powers)\b|\b(which|what) expression\b|\bexpressions? (that |which )?"
    r"(shows?|represents?|can be used|could be used|is equivalent)\b|\bone way to\b|\bas a (product|sum) of\b",
    re.IGNORECASE)
# Numbers joined by operators, nothing else: a value written out, whose form a value checker does not see.
CONSTANT_ARITHMETIC = re.compile(
    r"[\d.\s(){}]*\d[\d.\s(){}]*(?:(?:[-+*^!]|\\times|\\cdot|\\div)[\d.\s(){}!]*)+")
# A clock time ("14 : 00", "3:58 p.m."): the reward compares numbers and ratios, so "2 pm" and "3:58 pm" scored 0.
TIME_OF_DAY = re.compile(r"\s*\d{1,2}\s?:\s?\d{2}\s*(?P<half>[ap]\.?\s?m\b\.?)?\s*", re.IGNORECASE)
ASKS_TIME = re.compile(r"\bwhat time\b|\bclocks?\b|o'\s?clock|\b[ap]\.m\b", re.IGNORECASE)
PAIR_DASH = re.compile(r"\s*\d[\d.,]*\s+-\s+\d[\d.,]*\s*")
# A polynomial ring over Z_n: its elements have many spellings (-3 is 5 in Z_8) that no checker over Q equates.
MODULAR_RING = re.compile(r"\bZ_?\{?\d+\}?\s*\[\s*[a-z]\s*\]")
# Options that point at other options: meaningful only next to them.
TOGETHER = re.compile(
    r"\b(both|all|none|neither)\s+(of\s+)?(the\s+)?(above|these|them|those)\b|\bboth\s+\(?[A-E]\)?\s+and\s+\(?[A-E]\)?"
    r"|^\s*\(?[A-E]\)?\s+(and|or|&)\s+\(?[A-E]\)?\s*$|\bneither\s+\(?[A-E]\)?\s+nor\s+\(?[A-E]\)?|^\s*none\s*$",
    re.IGNORECASE)


def truncated_reason(stem: str) -> str | None:
    text = re.sub(r"\s+", " ", stem).strip()
    if COMPLETION.search(text):
        return None
    if not ASKS.search(text):
        return f"truncated_stem: no question or instruction in {text[-40:]!r}"
    last_sentence = re.split(r"(?<=[.?!])\s+", text)[-1]
    if not ENDS_SENTENCE.search(text) and not ASKS.search(last_sentence):
        return f"truncated_stem: ends mid-sentence {text[-40:]!r}"
    return None


def unstated_constant_reason(stem: str, options: dict[str, str]) -> str | None:
    """g that the stem never gives, flagged when the options carry numbers (and so the writer's value of g)."""
    if not (GRAVITY_MOTION.search(stem) or GRAVITY_FORCE.search(stem)) or GRAVITY_GIVEN.search(stem):
        return None
    numeric = [text for text in options.values() if re.search(r"\d", text)]
    if numeric:
        return "unstated_constant: motion under gravity and no value of g in the question, numeric options"
    return None


def stem_reason(stem: str) -> str | None:
    for reason, pattern in STEM_RULES:
        if m := pattern.search(stem):
            return f"{reason}: {m.group(0).strip()!r}"
    if reason := truncated_reason(stem):
        return reason
    if (m := APPROXIMATE.search(stem)) and not STATED_PRECISION.search(stem):
        return f"approximate_answer: {m.group(0)!r} with no stated precision"
    return None


def _decimals(number: str) -> int:
    return len(number.partition(".")[2])


def rounded_reason(stem: str, answer: Answer) -> str | None:
    """A gold that is probably a rounding of the true value: a checker comparing to six places would
    then reject a model's exact answer. Scientific notation (significant figures) and decimals with
    more places than any number in the stem count as rounded unless the stem states the precision."""
    if STATED_PRECISION.search(stem):
        return None
    if re.search(r"\\times\s*10\^|\d[eE][-+]?\d", answer.latex) or "10^" in answer.latex:
        return f"rounded_answer: {answer.latex[:30]!r} in significant figures"
    places = [_decimals(n) for n in re.findall(r"\d*\.\d+", answer.latex)]
    given = max((_decimals(n) for n in re.findall(r"\d*\.\d+", stem)), default=0)
    if places and max(places) >= 2 and max(places) > given:
        return f"rounded_answer: {answer.latex[:30]!r} has more decimal places than the question's numbers"
    return None
