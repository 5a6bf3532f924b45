"""Does a document hold a problem and a worked solution to it? (the reference pipeline's `is_solution` question)

Two judges, one answer shape, {"contain_problem": bool, "contain_solution": bool}:
- `cues` (CPU): a problem statement (a question, or a task verb in its bare form: find / compute / prove / how many)
  in the first part of the document, followed by a worked solution: at least two steps (equations, "so", "then",
  numbered steps ...) and a conclusion (an answer line, \\boxed, ####, therefore, QED ..., or a result stated at the
  end) after the problem; a document that ends asking (a question, a request for help) holds no finished solution.
- `llm`: the versioned prompt in prompts/is_solution_v1 (document first, then the question), parsed by
  `parse_solution_answer`; an unreadable answer is an error with its reason, never a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from curate.classifiers.llm import DocumentPrompt, flat_json_objects_last_first, read_flag

PROMPTS_DIR = Path(__file__).parent / "prompts" / "is_solution_v1"
# v2 (read on 80 Stack Exchange texts, 40 kept and 40 rejected by v1: 9 of v1's 40 kept held a problem and its
# solution): a task verb counts in its bare form only ("find", not "finding" or "factors through"); a premise
# ("let x be", "suppose", "given that") is not a task, since proofs and answers open with them as often as problems;
# answer options ("Options: A) ...") state a problem; a document that ends with a question or a request for help
# is unsolved.
CUE_VERSION = "solution_cues_v2"
JUDGES = ("cues", "llm")

_PROBLEM = re.compile(
    r"\?|\b(?:find|compute|calculate|evaluate|determine|solve|simplify|prove|show that|express|how (?:many|much|long|far)"
    r"|what (?:is|are|was|were)|which of|convert|factor)\b|\b(?:options|answer choices)\s*:"
    r"|^\s*(?:problem|question|exercise)\s*[:.\d]", re.IGNORECASE | re.MULTILINE)
_STEP = re.compile(
    r"(?:[^=<>!]=[^=>]|\\(?:frac|cdot|times)|<<[^>]*>>|^\s*(?:step\s*\d+|\d+[.)]\s)|\b(?:so|then|thus|hence|we (?:get|have"
    r"|find|obtain|know)|which gives|this gives|substitut\w+|plug\w* in|multiply\w*|divid\w+|add\w*|subtract\w*)\b)",
    re.IGNORECASE | re.MULTILINE)
_CONCLUSION = re.compile(
    r"\\boxed|^\s*#{4}\s*\S|\b(?:the (?:final )?answer is|answer\s*[:=]|therefore|hence|thus|in conclusion|q\.?e\.?d"
    r"|so the (?:answer|result|total|number|value)|which is (?:the )?(?:answer|correct)|final answer|correct (?:answer|option)"
    r"|answer\s*(?:is\s*|[:=-]\s*)?\(?[a-e]\)?(?:\W|$))|∎|∴|\\blacksquare|\\square",
    re.IGNORECASE | re.MULTILINE)
# A result at the end: "... costs 29 cents.", "x = 250 m", "is $\sqrt{53}$".
_RESULT = re.compile(r"(?:\b(?:is|are|equals?|costs?|gives|makes|was|were)\b|=)\s*[^\s.]{0,3}(?:\d|\$|\\\()", re.IGNORECASE)
TAIL_CHARS = 300
# The end of a document that is still asking: a question in its last sentences, or a request for help.
_ASKING = re.compile(
    r"\?[\s\"')\]]*$|\b(?:thanks?|thank you) (?:in advance|for (?:any|your|the) help)"
    r"|\bany (?:help|hints?|ideas?|suggestions?)\b|\bhow (?:should|can|do|would) i\b"
    r"|\bi (?:don't|do not|can't|cannot|couldn't|didn't|did not) (?:see|know|understand|figure|get|solve|prove|manage)\b"
    r"|\bam i (?:right|correct|wrong|missing)\b|\b(?:could|can|would) (?:someone|anyone|somebody)\b|\bplease help\b"
    r"|\bi(?:'m| am) stuck\b", re.IGNORECASE)
ASKING_CHARS = 200
# A problem is stated near the top; the rest of a long document may be the solution.
PROBLEM_WINDOW = 0.5
MIN_SOLUTION_CHARS = 60
MIN_STEPS = 2


@dataclass(frozen=True)
class SolutionJudgement:
    contain_problem: bool | None
    contain_solution: bool | None
    reason: str | None = None  # why not kept: no_problem, no_solution, or error: ...

    @property
    def kept(self) -> bool:
        return bool(self.contain_problem and self.contain_solution)


def judge_by_cues(text: str) -> SolutionJudgement:
    """The CPU rule; `reason` says which half is missing."""
    window = text[: max(400, int(len(text) * PROBLEM_WINDOW))]
    problem = _PROBLEM.search(window)
    if problem is None:
        solved = len(_STEP.findall(text)) >= MIN_STEPS and (
            _CONCLUSION.search(text) is not None or _RESULT.search(text[-TAIL_CHARS:]) is not None)
        return SolutionJudgement(False, solved, "no_problem")
    rest = text[problem.end():]
    steps = len(_STEP.findall(rest))
    concluded = _CONCLUSION.search(rest) is not None or _RESULT.search(rest[-TAIL_CHARS:]) is not None
    asking = _ASKING.search(text.rstrip()[-ASKING_CHARS:]) is not None
    solved = len(rest.strip()) >= MIN_SOLUTION_CHARS and steps >= MIN_STEPS and concluded and not asking
    return SolutionJudgement(True, solved, None if solved else "no_solution")


class SolutionPrompt(DocumentPrompt):
    @classmethod
    def load(cls, directory: Path = PROMPTS_DIR) -> SolutionPrompt:
        return cls.read(directory)

    def messages(self, document: str) -> list[dict]:
        return self.render(document)


def parse_solution_answer(output: str | None) -> SolutionJudgement:
    """The last JSON object with both keys (think blocks and prose around it are ignored); anything else is an
    error judgement with the reason, so that the document is rejected as unjudged, not as problem-free."""
    if not output or not output.strip():
        return SolutionJudgement(None, None, "error: empty output")
    text = re.sub(r"<think>.*?</think>", "", output, flags=re.IGNORECASE | re.DOTALL)
    for answer in flat_json_objects_last_first(text):
        problem, solution = read_flag(answer.get("contain_problem")), read_flag(answer.get("contain_solution"))
        if problem is None or solution is None:
            continue
        reason = None if problem and solution else "no_problem" if not problem else "no_solution"
        return SolutionJudgement(problem, solution, reason)
    return SolutionJudgement(None, None, "error: no JSON object with contain_problem and contain_solution")
