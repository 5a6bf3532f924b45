"""Executable GSM8K solutions: calculator annotations parsed into an expression graph.

A GSM8K solution writes each computation as `<<48/2=24>>`. Every annotation becomes a *step*: an
expression tree whose leaves are number literals. Each literal is linked to where its value comes
from: an earlier step's result, a number given in the question, or a constant the solver brought in
(60 minutes, 100 percent, "half" = 2). Re-executing the steps with one given replaced by another
value recomputes the answer, which is what chaining needs.

Arithmetic is exact (`fractions.Fraction`) and done by a small recursive-descent parser over
`+ - * / ( )` and decimal numbers: nothing from the data is ever handed to `eval`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction

# Numbers in question text: "1,200", "3.5", "12". Lookarounds keep "a2" or "3.5.1" from matching.
QUESTION_NUMBER = re.compile(r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\d.]?\d)")
ANNOTATION = re.compile(r"<<([^<>]*)>>")
FINAL_ANSWER = re.compile(r"^####\s*(.+?)\s*$", re.MULTILINE)
TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d*)?|\.\d+)|([-+*/()]))")
RANGE_END = re.compile(r"\d-")
RANGE_START = re.compile(r"-\d")
ORDINAL = re.compile(r"(?:st|nd|rd|th)\b")
CLOCK = re.compile(r"\s?(?:am\b|pm\b|a\.m\.|p\.m\.|o'clock)", re.IGNORECASE)

# Arithmetic the solver wrote outside the annotations ("9000(.30)=2700", "$2500-$500=$2000", "half of 24",
# "30% of 9000"). Re-executing the annotations cannot follow a value through it, so a link whose value
# reaches it is refused.
WRITTEN_NUMBER = r"\$?\s*(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\$?\s*\.\d+"
RESULT_AFTER_ANNOTATION = re.compile(r"^\s*\$?\s*\d[\d,]*(?:\.\d+)?")
OPERAND_BEFORE = re.compile(rf"({WRITTEN_NUMBER})(?=\s*(?:[-–−+*/x×÷^=(]|%))")
OPERAND_AFTER = re.compile(rf"(?<=[-–−+*/×÷^=()])\s*({WRITTEN_NUMBER})")
PLAIN_RESULT = re.compile(rf"=\s*({WRITTEN_NUMBER})")
WORD_OPERATION = re.compile(
    r"\b(?:half|halves|third|thirds|quarter|quarters|fourth|fifth|tenth|twice|double|triple|thrice|percent)\b"
    rf"(?:\s+(?:of|as|that|the|is|was|her|his|their|its|it))*\s*({WRITTEN_NUMBER})",
    re.IGNORECASE,
)
NUMBER_WORDS = {
    1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten",
    11: "eleven", 12: "twelve", 13: "thirteen", 14: "fourteen", 15: "fifteen", 16: "sixteen", 17: "seventeen",
    18: "eighteen", 19: "nineteen", 20: "twenty", 30: "thirty", 40: "forty", 50: "fifty", 60: "sixty",
    70: "seventy", 80: "eighty", 90: "ninety", 100: "hundred",
}

MAX_DEPTH = 64
MAX_EXPRESSION_CHARS = 500


class ExpressionError(ValueError):
    """An annotation that is not plain arithmetic, or arithmetic that cannot be carried out."""


def parse_number(text: str) -> Fraction:
    """'1,200' -> 1200, '2.50' -> 5/2, '-3' -> -3; raises ExpressionError on anything else."""
    cleaned = text.strip().replace(",", "")
    if cleaned.startswith("$"):
        cleaned = cleaned[1:]
    if not re.fullmatch(r"-?(?:\d+(?:\.\d*)?|\.\d+)", cleaned):
        raise ExpressionError(f"not a number: {text!r}")
    return Fraction(cleaned)


def is_whole(value: Fraction) -> bool:
    return value.denominator == 1


def format_number(value: Fraction) -> str | None:
    """Shortest decimal text of `value`, or None when it has no terminating decimal expansion."""
    if is_whole(value):
        return str(value.numerator)
    denominator = value.denominator
    twos = fives = 0
    while denominator % 2 == 0:
        denominator //= 2
        twos += 1
    while denominator % 5 == 0:
        denominator //= 5
        fives += 1
    if denominator != 1:
        return None
    places = max(twos, fives)
    digits = abs(value.numerator) * 10**places // value.denominator
    sign = "-" if value < 0 else ""
    whole, fraction = divmod(digits, 10**places)
    return f"{sign}{whole}.{str(fraction).rjust(places, '0').rstrip('0')}"


# Expression trees are tuples, cheap to build and walk:
#   ("lit", index)        leaf: the literal with that index in its step
#   ("neg", node)
#   ("bin", op, left, right)


@dataclass
class Literal:
    text: str
    value: Fraction
    kind: str = "const"  # "step" (an earlier result), "given" (a number in the question) or "const"
    ref: int = -1  # step index or given index


@dataclass
class Step:
    expression: str
    tree: tuple
    literals: list[Literal]
    stated: Fraction


def parse_expression(text: str) -> tuple[tuple, list[Literal]]:
    """Parse `+ - * / ( )` over decimal numbers into a tree and its literals."""
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ExpressionError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    tokens: list[tuple[str, str]] = []
    position = 0
    stripped = text.rstrip()
    while position < len(stripped):
        match = TOKEN.match(stripped, position)
        if not match:
            raise ExpressionError(f"unsupported character {stripped[position:].strip()[:1]!r} in {text!r}")
        tokens.append(("num", match.group(1)) if match.group(1) else ("op", match.group(2)))
        position = match.end()
    if not tokens:
        raise ExpressionError("empty expression")
    literals: list[Literal] = []
    index = 0

    def peek() -> tuple[str, str] | None:
        return tokens[index] if index < len(tokens) else None

    def expression(depth: int) -> tuple:
        nonlocal index
        node = term(depth)
        while (token := peek()) and token[1] in "+-" and token[0] == "op":
            index += 1
            node = ("bin", token[1], node, term(depth))
        return node

    def term(depth: int) -> tuple:
        nonlocal index
        node = factor(depth)
        while (token := peek()) and token[0] == "op" and token[1] in "*/":
            index += 1
            node = ("bin", token[1], node, factor(depth))
        return node

    def factor(depth: int) -> tuple:
        nonlocal index
        if depth > MAX_DEPTH:
            raise ExpressionError("expression nested too deeply")
        token = peek()
        if token is None:
            raise ExpressionError(f"expression ends early: {text!r}")
        index += 1
        kind, value = token
        if kind == "num":
            literals.append(Literal(text=value, value=Fraction(value)))
            return ("lit", len(literals) - 1)
        if value == "-":
            return ("neg", factor(depth + 1))
        if value == "+":
            return factor(depth + 1)
        if value == "(":
            node = expression(depth + 1)
            if peek() != ("op", ")"):
                raise ExpressionError(f"unbalanced parentheses in {text!r}")
            index += 1
            return node
        raise ExpressionError(f"unexpected {value!r} in {text!r}")

    tree = expression(0)
    if index != len(tokens):
        raise ExpressionError(f"unexpected {tokens[index][1]!r} in {text!r}")
    return tree, literals


def evaluate(tree: tuple, leaf_values: list[Fraction]) -> Fraction:
    kind = tree[0]
    if kind == "lit":
        return leaf_values[tree[1]]
    if kind == "neg":
        return -evaluate(tree[1], leaf_values)
    _, op, left, right = tree
    a = evaluate(left, leaf_values)
    b = evaluate(right, leaf_values)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0:
        raise ExpressionError("division by zero")
    return a / b


@dataclass
class Given:
    """A number written in the question text."""

    text: str
    value: Fraction
    start: int
    end: int
    substitutable: bool  # not part of a fraction, a clock time or an ordinal


@dataclass
class PlainArithmetic:
    """What a solution computes in plain text, outside its annotations."""

    operands: set[Fraction] = field(default_factory=set)  # numbers taking part in it
    results: set[Fraction] = field(default_factory=set)  # numbers it produces (after a written '=')


def plain_arithmetic(solution: str) -> PlainArithmetic:
    """The numbers of every computation written outside the annotations. The text in front of an annotation
    usually restates it ("70 mph - 55 mph = <<70-55=15>>15 mph", "a third of 12 ... 12*(1/3) = <<...>>"), so there
    a number that the annotation itself uses is not counted; the result written right after it is not either."""
    found = PlainArithmetic()
    for line in solution.splitlines():
        if line.startswith("####"):
            continue
        pieces = ANNOTATION.split(line)  # text, annotation, text, ..., text
        for position in range(0, len(pieces), 2):
            text = pieces[position]
            if position > 0:
                text = RESULT_AFTER_ANNOTATION.sub(" ", text)
            restated = set(_numbers(pieces[position + 1])) if position + 1 < len(pieces) else set()
            operands = [m.group(1) for pattern in (OPERAND_BEFORE, OPERAND_AFTER, WORD_OPERATION)
                        for m in pattern.finditer(text)]
            found.operands.update(v for v in map(_value, operands) if v not in restated)
            found.results.update(_value(m.group(1)) for m in PLAIN_RESULT.finditer(text))
    return found


def _value(written: str) -> Fraction:
    return parse_number(written.replace(" ", ""))


def _numbers(annotation: str) -> list[Fraction]:
    return [Fraction(m) for m in re.findall(r"\d+(?:\.\d+)?|\.\d+", annotation)]


def written_in_words(value: Fraction, text: str) -> bool:
    """Whether `value` is also written as a word in `text` ("five"): replacing the digits would leave it."""
    word = NUMBER_WORDS.get(value.numerator) if value.denominator == 1 else None
    return bool(word and re.search(rf"\b{word}\b", text, re.IGNORECASE))


@dataclass
class Solution:
    steps: list[Step]
    givens: list[Given]
    answer: Fraction
    answer_step: int
    values: list[Fraction] = field(default_factory=list)
    plain: PlainArithmetic = field(default_factory=PlainArithmetic)

    def execute(self, overrides: dict[int, Fraction] | None = None) -> list[Fraction]:
        """Every step's value, with given `i` taking the value `overrides[i]` where one is set."""
        overrides = overrides or {}
        values: list[Fraction] = []
        for step in self.steps:
            leaves = []
            for literal in step.literals:
                if literal.kind == "step":
                    leaves.append(values[literal.ref])
                elif literal.kind == "given" and literal.ref in overrides:
                    leaves.append(overrides[literal.ref])
                else:
                    leaves.append(literal.value)
            values.append(evaluate(step.tree, leaves))
        return values

    def depends_on(self, step_index: int) -> set[int]:
        """Indices of the givens that feed `step_index`, through any chain of steps."""
        givens: set[int] = set()
        seen: set[int] = set()
        pending = [step_index]
        while pending:
            index = pending.pop()
            if index in seen:
                continue
            seen.add(index)
            for literal in self.steps[index].literals:
                if literal.kind == "given":
                    givens.add(literal.ref)
                elif literal.kind == "step":
                    pending.append(literal.ref)
        return givens

    def steps_fed_by(self, given: int) -> list[int]:
        """Indices of the steps whose value depends on given `given`, through any chain of steps."""
        fed: list[int] = []
        for index, step in enumerate(self.steps):
            if any((lit.kind == "given" and lit.ref == given) or (lit.kind == "step" and lit.ref in fed)
                   for lit in step.literals):
                fed.append(index)
        return fed

    def substitutable_givens(self) -> list[int]:
        """Givens that can take the previous hop's answer: written once in the question, feeding the
        answer, and not equal to any intermediate result (where a literal with that value could be
        either, which one it was cannot be told apart)."""
        results = set(self.values)
        counts: dict[Fraction, int] = {}
        for given in self.givens:
            counts[given.value] = counts.get(given.value, 0) + 1
        feeding = self.depends_on(self.answer_step)
        return [
            i for i, given in enumerate(self.givens)
            if given.substitutable and given.value > 0 and counts[given.value] == 1
            and i in feeding and given.value not in results
        ]


def question_numbers(question: str) -> list[Given]:
    givens = []
    for match in QUESTION_NUMBER.finditer(question):
        before = question[max(0, match.start() - 2):match.start()]
        after = question[match.end():match.end() + 10]
        # Parts of "1/2", "3:30", "10-12", "5th" or "7 pm" are not quantities a previous answer can stand in
        # for; "a 5-year-old" is.
        substitutable = not (
            before[-1:] in ("/", ":") or after[:1] in ("/", ":") or RANGE_END.fullmatch(before)
            or RANGE_START.match(after) or ORDINAL.match(after) or CLOCK.match(after)
        )
        givens.append(Given(match.group(), parse_number(match.group()), match.start(), match.end(), substitutable))
    return givens


class UnexecutableSolution(ValueError):
    """A solution that cannot be turned into a graph reproducing its answer; `reason` is a short slug."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def parse_solution(question: str, solution: str) -> Solution:
    """Build the expression graph of a GSM8K solution and check that executing it reproduces the
    `#### N` answer exactly. Raises UnexecutableSolution with the reason otherwise."""
    final = FINAL_ANSWER.findall(solution)
    if not final:
        raise UnexecutableSolution("no_final_answer", "no '#### N' line")
    try:
        answer = parse_number(final[-1])
    except ExpressionError as error:
        raise UnexecutableSolution("final_answer_not_a_number", str(error)) from None
    annotations = ANNOTATION.findall(solution)
    if not annotations:
        raise UnexecutableSolution("no_annotations", "no <<expression=result>> annotation")
    givens = question_numbers(question)
    given_by_value: dict[Fraction, int] = {}
    for i, given in enumerate(givens):
        given_by_value.setdefault(given.value, i)
    steps: list[Step] = []
    values: list[Fraction] = []
    for annotation in annotations:
        expression, equals, stated_text = annotation.rpartition("=")
        if not equals:
            raise UnexecutableSolution("annotation_without_result", f"<<{annotation}>>")
        try:
            tree, literals = parse_expression(expression)
            stated = parse_number(stated_text)
        except ExpressionError as error:
            raise UnexecutableSolution("annotation_not_arithmetic", f"<<{annotation}>>: {error}") from None
        latest_result: dict[Fraction, int] = {v: i for i, v in enumerate(values)}
        for literal in literals:
            if literal.value in latest_result:
                literal.kind, literal.ref = "step", latest_result[literal.value]
            elif literal.value in given_by_value:
                literal.kind, literal.ref = "given", given_by_value[literal.value]
        step = Step(expression=expression.strip(), tree=tree, literals=literals, stated=stated)
        try:
            value = evaluate(tree, [literal.value for literal in literals])
        except ExpressionError as error:
            raise UnexecutableSolution("annotation_not_arithmetic", f"<<{annotation}>>: {error}") from None
        if value != stated:
            raise UnexecutableSolution(
                "annotation_mismatch", f"<<{annotation}>>: the expression gives {format_number(value) or value}"
            )
        steps.append(step)
        values.append(value)
    answer_steps = [i for i, v in enumerate(values) if v == answer]
    if not answer_steps:
        raise UnexecutableSolution("answer_not_reproduced", f"no annotation computes the answer {final[-1]}")
    result = Solution(steps=steps, givens=givens, answer=answer, answer_step=answer_steps[-1],
                      plain=plain_arithmetic(solution))
    # Linking by value can point a literal at a different earlier step holding the same value as the one
    # the solver meant; the values are equal, so re-execution still reproduces every annotation.
    result.values = result.execute()
    if result.values != values:
        raise UnexecutableSolution("answer_not_reproduced", "re-executing the graph does not reproduce the annotations")
    return result
