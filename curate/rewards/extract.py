"""Final-answer extraction from model output: `\\boxed{}`, `<answer>` tags, "The answer is", or own patterns.

Models mark their final answer in a few conventional ways; which ones a reward accepts is a setting
(`Extraction`), because a reward that accepts an answer the prompt never asked for in that form
is a different reward. The *last* marked answer wins: reasoning traces often box intermediate results.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MARKERS = ("answer_tag", "boxed", "answer_is")
BOX_COMMANDS = ("\\boxed", "\\fbox")
ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
# "The answer is 5", "Final answer: 5", "**Answer:** 5": the rest of that line is the answer.
ANSWER_IS = re.compile(
    r"(?:final\s+answer|the\s+answer|answer)\s*(?:is|:|=)\s*:?\s*(?P<answer>[^\n]+)", re.IGNORECASE
)
INLINE_MATH = re.compile(r"\$([^$]+)\$|\\\((.+?)\\\)")
MAX_ANSWER_CHARS = 1_000


@dataclass(frozen=True)
class Extraction:
    """How a final answer is found.

    markers: tried in this order; the first one present in the text decides (its last occurrence).
    patterns: extra regular expressions tried after the markers; group `answer` (or group 1) is the answer.
    whole_text_fallback: with no marker, the last inline math span, else the whole text, is the answer: for
        bare final answers such as a verifier pair's candidate, never for reasoning traces.
    """

    markers: tuple[str, ...] = MARKERS
    patterns: tuple[str, ...] = ()
    whole_text_fallback: bool = False

    def __post_init__(self):
        unknown = [m for m in self.markers if m not in MARKERS]
        if unknown:
            raise ValueError(f"unknown answer marker(s) {unknown}; known: {', '.join(MARKERS)}")
        for pattern in self.patterns:
            re.compile(pattern)


DEFAULT = Extraction()
BARE = Extraction(whole_text_fallback=True)


def boxed_contents(text: str) -> list[str]:
    """Contents of every `\\boxed{...}` / `\\fbox{...}` with balanced braces, in order of appearance."""
    found = []
    for command in BOX_COMMANDS:
        start = 0
        while (at := text.find(command, start)) != -1:
            start = at + len(command)
            rest = text[start:]
            stripped = rest.lstrip()
            if stripped.startswith("{"):
                open_at = start + len(rest) - len(stripped)
                depth = 0
                for i in range(open_at, len(text)):
                    if text[i] == "{":
                        depth += 1
                    elif text[i] == "}":
                        depth -= 1
                        if depth == 0:
                            found.append((at, text[open_at + 1 : i]))
                            break
            elif rest[:1] == " ":
                # `\boxed 5`: a single token follows.
                token = re.match(r"\s+([^\s$]+)", rest)
                if token:
                    found.append((at, token.group(1)))
    return [content for _, content in sorted(found)]


def clean_answer(answer: str) -> str:
    """Strips the wrapping models put around an answer: math delimiters, bold, a final period."""
    answer = answer.strip()
    for _ in range(3):
        before = answer
        answer = answer.strip().strip("*").strip()
        for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
            if answer.startswith(left) and answer.endswith(right) and len(answer) >= len(left) + len(right):
                answer = answer[len(left) : len(answer) - len(right)].strip()
        answer = re.sub(r"[.。]\s*$", "", answer).strip()
        if answer == before:
            break
    return answer


def _marker_answers(text: str, marker: str) -> list[str]:
    if marker == "boxed":
        return boxed_contents(text)
    if marker == "answer_tag":
        return [m.group(1) for m in ANSWER_TAG.finditer(text)]
    return [m.group("answer") for m in ANSWER_IS.finditer(text)]


def extract_answer(text: str | None, config: Extraction = DEFAULT) -> str | None:
    """The final answer in `text`, cleaned, or None when the text marks none."""
    if not text:
        return None
    for marker in config.markers:
        answers = _marker_answers(text, marker)
        if answers:
            answer = answers[-1]
            # "The answer is \boxed{5}" or "<answer>\boxed{5}</answer>": the box is the answer.
            if marker != "boxed" and (inner := boxed_contents(answer)):
                answer = inner[-1]
            return _bounded(clean_answer(answer))
    for pattern in config.patterns:
        matches = list(re.finditer(pattern, text, re.MULTILINE))
        if matches:
            last = matches[-1]
            group = "answer" if "answer" in last.re.groupindex else (1 if last.re.groups else 0)
            return _bounded(clean_answer(last.group(group)))
    if config.whole_text_fallback:
        # "The probability is $\\frac{1}{252}$.": the last math span is the answer, else the whole text.
        spans = [a or b for a, b in INLINE_MATH.findall(text)]
        return _bounded(clean_answer(spans[-1] if spans else text))
    return None


def _bounded(answer: str) -> str | None:
    # An "answer" of thousands of characters is a runaway generation, not an answer; it would only feed the
    # symbolic engine a pathological input.
    if not answer or len(answer) > MAX_ANSWER_CHARS:
        return None
    return answer
