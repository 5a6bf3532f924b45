"""Final-answer extraction from model output, in the formats models write.

Which markers a reward accepts is a setting (`Extraction`), because a reward that accepts an answer the prompt never
asked for in that form is a different reward. Among what a response marks, the answer is, in this order:
1. the last `<answer>` tag;
2. the last `\\boxed{}` or closing statement ("The final answer is ...", "Final Answer: ...", GSM8K's own answer lines
   `#### 18` and `A: 18`), whichever comes later: a closing statement wins over an intermediate box, a box after it
   wins over it. Several boxes written one after another ("\\boxed{1}, \\boxed{2} and \\boxed{3}") are one answer
   in several parts, joined;
3. the last "The answer is ...", "Answer: ...", "**Answer:** ..." (an earlier box wins over it: it is often a
   second thought written after the boxed answer);
4. a last line that is a bare value (`18`, `$\\frac{1}{2}$`).
An answer statement is read to the end of its sentence, not its line (models run on: "... is $28\\%$. I hope it is
correct. Note: ..."), and a sentence that names what it answers ("The largest $n$ is 34") is read after its last "is".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MARKERS = ("answer_tag", "boxed", "final_answer", "answer_is", "gsm8k", "last_line")
# How a response gave its answer (`locate_answer`): a marker, "boxes" (several boxes joined), an Extraction's own
# pattern, the whole-text fallback of bare answers, or nothing the reward reads.
ANSWER_FORMATS = ("answer_tag", "boxed", "boxes", "final_answer", "answer_is", "gsm8k", "last_line", "pattern",
                  "whole_text", "unmarked")
BOX_COMMANDS = ("\\boxed", "\\fbox")
ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
# "The final answer is 5", "Final Answer: 5", "**Final Answer**\n5": a closing statement.
_STATES = r"(?:is|should\s+be|must\s+be|would\s+be|will\s+be)\b"
FINAL_ANSWER = re.compile(r"final\s+answer\**\s*(?:" + _STATES + r"|:|=)?\s*\**\s*:?", re.IGNORECASE)
# "The answer is 5", "Answer: 5", "**Answer:** 5", "the answer should be 5".
ANSWER_IS = re.compile(r"\banswer\**\s*(?:" + _STATES + r"|:|=)\s*\**\s*:?", re.IGNORECASE)
# GSM8K's reference solutions end in "#### 18", its model solutions in "A: 18".
GSM8K_LINE = re.compile(r"^[ \t]*(?:####|A:)[ \t]*(?P<answer>\S[^\n]*)$", re.MULTILINE)
# `$...$` with `\$` (an escaped dollar, a currency sign) inside, on one line (a lone "$1250" is money, not the start
# of a span that runs on over paragraphs), or `\(...\)`, `\[...\]`, `$$...$$`.
INLINE_MATH = re.compile(r"(?<!\\)\$\$(.+?)(?<!\\)\$\$|(?<!\\)\$((?:[^$\\\n]|\\.)+?)(?<!\\)\$"
                         r"|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)
LEADING_MATH = re.compile(r"\s*(?:" + INLINE_MATH.pattern + r")", re.DOTALL)
BARE_VALUE = re.compile(r"^\s*(?:-?\$?\s*-?\d[\d,]*(?:\.\d+)?(?:\s*/\s*\d+)?\s*%?|-?\.\d+)\s*\.?\s*$")
# Between two boxes of one answer: spacing, punctuation, math delimiters and "and"/"or", optionally in a short
# `\text{}` ("\boxed{(3, 3)} \text{ for part (a) and } \boxed{(1, 1)}").
_BOX_GAP_NOISE = re.compile(r"\\(?:quad|qquad|text|mathrm|textbf)\b|\\[,;:! ()\[\]]|[\s${}(),;.&*~]")
_BOX_GAP_WORDS = re.compile(r"(?:and|or|for|part|\([a-z]\)|[a-z]\))+")
MAX_BOX_GAP = 40
_VERDICT_WORDS = re.compile(r"(?:(?:probably|definitely|indeed|still|also)\s+)?(?:in)?correct|right|wrong|yes|no|"
                            r"(?:as\s+)?(?:follows|above|below)", re.IGNORECASE)
MAX_ANSWER_CHARS = 1_000
_SENTENCE_END = re.compile(r"(?<!\\)\.(?=\s|$)|。|\n|\bI hope\b", re.IGNORECASE)
# "The largest $n$ is 34", "the values are 1 and 2": a statement that names what it answers before its verb.
_NAMED_ANSWER = re.compile(
    r"^(?:the|a|an|our|its|their|so|thus|therefore|hence)\b.*?\b(?:is|are|equals)\b\s+(?P<value>.+)$",
    re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class Extraction:
    """How a final answer is found.

    markers: the answer markers read (see the module's order); a marker left out is never read.
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


def _boxes(text: str) -> list[tuple[int, int, str]]:
    """(start, end, content) of every `\\boxed{...}` / `\\fbox{...}` with balanced braces, in order of appearance."""
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
                            found.append((at, i + 1, text[open_at + 1 : i]))
                            break
            elif rest[:1] == " ":
                # `\boxed 5`: a single token follows.
                token = re.match(r"\s+([^\s$]+)", rest)
                if token:
                    found.append((at, start + token.end(), token.group(1)))
    return sorted(found)


def boxed_contents(text: str) -> list[str]:
    """Contents of every `\\boxed{...}` / `\\fbox{...}` with balanced braces, in order of appearance."""
    return [content for _, _, content in _boxes(text)]


def _joins_boxes(gap: str) -> bool:
    """Whether the text between two boxes only separates parts of one answer (", ", " and ", "\\quad")."""
    if len(gap) > MAX_BOX_GAP:
        return False
    words = _BOX_GAP_NOISE.sub("", gap).lower()
    return not words or bool(_BOX_GAP_WORDS.fullmatch(words))


def _last_box_run(text: str, boxes: list[tuple[int, int, str]]) -> tuple[int, str, str]:
    """(start of the run, answer, format) of the last run of boxes written one after another: one box's content
    ("boxed"), or the distinct contents of several joined by ", " ("boxes": parts of one answer, "\\boxed{-2} and
    \\boxed{1}")."""
    run = [boxes[-1]]
    for box in reversed(boxes[:-1]):
        if not _joins_boxes(text[box[1] : run[0][0]]):
            break
        run.insert(0, box)
    contents = list(dict.fromkeys(clean_answer(content) for _, _, content in run))
    return run[0][0], ", ".join(contents), "boxes" if len(contents) > 1 else "boxed"


def clean_answer(answer: str) -> str:
    """Strips the wrapping models put around an answer: math delimiters, bold, a final period."""
    answer = answer.strip()
    for _ in range(3):
        before = answer
        answer = answer.strip().strip("*").strip()
        for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
            if answer.startswith(left) and answer.endswith(right) and len(answer) >= len(left) + len(right):
                inner = answer[len(left) : len(answer) - len(right)]
                if not inner.endswith("\\"):  # `$5\$`: an escaped dollar, not a closing one
                    answer = inner.strip()
        answer = re.sub(r"[.。,;]\s*$", "", answer).strip()
        if answer.startswith("$") and answer.count("$") == 1:  # "$1250": a currency sign, not a math delimiter
            answer = answer[1:].strip()
        if answer == before:
            break
    return answer


def _math_spans(text: str) -> list[str]:
    return [next(group for group in match.groups() if group is not None) for match in INLINE_MATH.finditer(text)]


def statement_answer(rest: str) -> str:
    """The answer a statement gives, from the text after its marker: a box or math span that opens it, else its
    sentence (read after its last "is" when it names what it answers), up to the sentence's end."""
    rest = rest.lstrip(" \t:*")
    if boxes := _boxes(rest[:MAX_ANSWER_CHARS]):
        if not rest[: boxes[0][0]].strip(" \t\n$\\([:"):
            return _last_box_run(rest, boxes)[1]
    if leading := LEADING_MATH.match(rest):
        return next(group for group in leading.groups() if group is not None)
    sentence = rest
    cut = len(rest)
    spans = [(m.start(), m.end()) for m in INLINE_MATH.finditer(rest)]
    for end in _SENTENCE_END.finditer(rest):
        if not any(start < end.start() < stop for start, stop in spans):
            cut = end.start()
            break
    sentence = rest[:cut].strip()
    if named := _NAMED_ANSWER.match(sentence):
        sentence = named.group("value")
    return sentence


def _candidates(text: str, marker: str) -> list[tuple[int, str, str]]:
    """(position, answer, format) of every answer `marker` finds in `text`."""
    if marker == "answer_tag":
        found = []
        for match in ANSWER_TAG.finditer(text):
            inner = match.group(1)
            found.append((match.start(), _last_box_run(inner, _boxes(inner))[1] if _boxes(inner) else inner, marker))
        return found
    if marker == "boxed":
        boxes = _boxes(text)
        return [_last_box_run(text, boxes)] if boxes else []
    if marker in ("final_answer", "answer_is"):
        pattern = FINAL_ANSWER if marker == "final_answer" else ANSWER_IS
        found = [(m.start(), statement_answer(text[m.end() :]), marker) for m in pattern.finditer(text)]
        # "I think that's the final answer.", "the answer is correct": a remark on an answer, not one.
        return [c for c in found if clean_answer(c[1]) and not _VERDICT_WORDS.fullmatch(clean_answer(c[1]))]
    if marker == "gsm8k":
        return [(m.start(), statement_answer(m.group("answer")), marker) for m in GSM8K_LINE.finditer(text)]
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if lines and (BARE_VALUE.match(lines[-1]) or (LEADING_MATH.fullmatch(lines[-1].rstrip(". ")))):
        return [(len(text), lines[-1], marker)]
    return []


def locate_answer(text: str | None, config: Extraction = DEFAULT) -> tuple[str, str | None]:
    """(format, answer): how `text` gives its final answer (one of ANSWER_FORMATS) and that answer, cleaned (None when
    the text marks none, or what it marks is no answer: empty, or a runaway of over 1,000 characters)."""
    if not text:
        return "unmarked", None
    found = {marker: _candidates(text, marker) for marker in config.markers}
    chosen = None
    if found.get("answer_tag"):
        chosen = found["answer_tag"][-1]
    elif closing := found.get("boxed", []) + found.get("final_answer", []) + found.get("gsm8k", []):
        # The latest of the last box and the closing statements (GSM8K's answer line is one); a statement holding
        # that box is the box.
        chosen = max(closing, key=lambda c: c[0])
    else:
        chosen = next((found[m][-1] for m in ("answer_is", "last_line") if found.get(m)), None)
    if chosen is not None:
        return chosen[2], _bounded(clean_answer(chosen[1]))
    for pattern in config.patterns:
        matches = list(re.finditer(pattern, text, re.MULTILINE))
        if matches:
            last = matches[-1]
            group = "answer" if "answer" in last.re.groupindex else (1 if last.re.groups else 0)
            return "pattern", _bounded(clean_answer(last.group(group)))
    if config.whole_text_fallback:
        # "The probability is $\\frac{1}{252}$.": the last math span is the answer, else the whole text.
        spans = _math_spans(text)
        return "whole_text", _bounded(clean_answer(spans[-1] if spans else text))
    return "unmarked", None


def extract_answer(text: str | None, config: Extraction = DEFAULT) -> str | None:
    """The final answer in `text`, cleaned, or None when the text marks none."""
    return locate_answer(text, config)[1]


def _bounded(answer: str) -> str | None:
    # An "answer" of thousands of characters is a runaway generation, not an answer; it would only feed the
    # symbolic engine a pathological input.
    if not answer or len(answer) > MAX_ANSWER_CHARS:
        return None
    return answer
