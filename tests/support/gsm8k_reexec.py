"""A second evaluator for multi-hop chains, written apart from the builder (curate.builders.arith/multihop).

It agrees with the builder only if both are right: it reads the raw GSM8K solution text itself and
re-does every computation written in it, the `<<a=b>>` calculator annotations *and* the equations the
solver wrote in plain text ("After first year: 9000(.30)=2700", "$2500-$500=$2000"), which the builder
ignores. The substituted number is followed by value: every computation is evaluated twice, as written
and with each operand that is (an earlier copy of) a changed quantity replaced by its new value; a
result that changes becomes a changed quantity itself. The source's `#### N` answer, mapped the same
way, is the hop's answer.

Where reading by value cannot tell what a number means, the chain is reported as unchecked with the
reason rather than guessed (a changed value that is also another number of the question; a changed value
inside arithmetic written in words, such as "half of 24"; a written equation that does not hold).

Nothing is executed: expressions are parsed with `ast` and only numbers and + - * / ** are walked.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from fractions import Fraction

ANNOTATION = re.compile(r"<<([^<>]*)>>")
HOLE = "\x00"  # stands for an annotation once its text is taken out of a line
FINAL = re.compile(r"^####\s*(.+?)\s*$", re.MULTILINE)
QUESTION_NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?![\d.]?\d)")
FRACTION = re.compile(r"(?<![\w.])(\d+)/(\d+)(?![\w.])")
THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
TIMES_SIGN = re.compile(r"(?<=[\d)])\s*[x×]\s*(?=[\d$(.])")
# A plain-text equation: operands and operators, '=', a number, and no annotation right after the '='.
PLAIN_EQUATION = re.compile(
    r"(?P<expression>[$\d.,()+\-–−*/÷%x×\s]*\d[$\d.,()+\-–−*/÷%x×\s]*)=\s*\$?\s*(?P<result>\d[\d,]*(?:\.\d+)?|\.\d+)"
    r"(?![\d,]|\.\d)(?P<percent>\s*%)?(?!\s*[-–−+*/x×÷(])"
)
OPERATOR = re.compile(r"[+\-–−*/÷()%]")
NUMBER_IN_TEXT = re.compile(r"\d+(?:\.\d+)?|\.\d+")
WORD_ARITHMETIC = re.compile(
    r"\b(?:half|halves|third|thirds|quarter|quarters|fourth|fifth|tenth|twice|double|triple|thrice|percent)\b"
    r"(?:\s+(?:of|as|that|the|is|was))*\s*\$?\s*(?P<after>\d[\d,]*(?:\.\d+)?)"
    r"|(?P<before>\d[\d,]*(?:\.\d+)?)\s*(?:%|percent\b)",
    re.IGNORECASE,
)
NUMBER_WORDS = {
    1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten",
    11: "eleven", 12: "twelve", 13: "thirteen", 14: "fourteen", 15: "fifteen", 16: "sixteen", 17: "seventeen",
    18: "eighteen", 19: "nineteen", 20: "twenty", 30: "thirty", 40: "forty", 50: "fifty", 100: "hundred",
}


class Unchecked(Exception):
    """The text does not say unambiguously what the substituted number changes."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def number(text: str) -> Fraction:
    return Fraction(text.replace("$", "").replace(",", "").strip())


def normalise(expression: str) -> str:
    """Written arithmetic to Python's: no $ or thousands commas, x/×/÷ as operators, 9000(.30) as a product, 40% as /100."""
    text = THOUSANDS.sub("", expression.replace("$", ""))
    text = TIMES_SIGN.sub("*", text).replace("÷", "/").replace("–", "-").replace("−", "-")
    text = re.sub(r"(?<=[\d)])\s*\(", "*(", text)
    text = re.sub(r"\)\s*(?=[\d.(])", ")*", text)
    return text.replace("%", "/100")


def evaluate(expression: str, operand) -> Fraction:
    """Exact value of `expression`, each number literal passed through `operand` first."""
    text = normalise(expression).strip()
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise Unchecked("unparsable_arithmetic", expression) from None

    def walk(node) -> Fraction:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return operand(Fraction(ast.get_source_segment(text, node)))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            value = walk(node.operand)
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.BinOp):
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Add):
                return left + right
            if isinstance(node.op, ast.Sub):
                return left - right
            if isinstance(node.op, ast.Mult):
                return left * right
            if isinstance(node.op, ast.Div):
                if right == 0:
                    raise Unchecked("division_by_zero", expression)
                return left / right
            if isinstance(node.op, ast.Pow) and right.denominator == 1 and abs(right) <= 8:
                return left ** int(right)
        raise Unchecked("unparsable_arithmetic", expression)

    return walk(tree)


@dataclass
class Computation:
    expression: str
    stated: Fraction
    annotated: bool


def computations(solution: str) -> tuple[list[Computation], list[tuple[str, set[Fraction]]]]:
    """Every computation in the order written, and per line the plain text left around them (for word
    arithmetic) with the numbers its computations use."""
    found: list[Computation] = []
    leftovers: list[tuple[str, set[Fraction]]] = []
    for line in solution.splitlines():
        if line.startswith("####"):
            continue
        pieces = ANNOTATION.split(line)  # text, annotation, text, annotation, ...
        plain = HOLE.join(pieces[0::2])
        annotations = iter(pieces[1::2])
        line_found: list[tuple[int, Computation]] = []
        for match in PLAIN_EQUATION.finditer(plain):
            # The class of operand characters also takes in the x of a word before the first number ("tax 5+3").
            # The operand characters also take in what ends a clause ("Out of the 35, 3 + 2 = 5") and the x of a
            # word before the first number ("tax 5+3"): the equation starts after both.
            expression = re.split(r",\s", match.group("expression"))[-1]
            expression = re.sub(r"^[^\d($.]*", "", expression)
            result = number(match.group("result")) / (100 if match.group("percent") else 1)
            if OPERATOR.search(expression.strip()) or TIMES_SIGN.search(expression):
                line_found.append((match.start(), Computation(expression, result, False)))
        holes = [i for i, char in enumerate(plain) if char == HOLE]
        for hole in holes:
            expression, _, stated = next(annotations).rpartition("=")
            try:
                value = number(stated)
            except (ValueError, ZeroDivisionError):
                raise Unchecked("annotation_result_not_a_number", stated) from None
            line_found.append((hole, Computation(expression, value, True)))
        found.extend(c for _, c in sorted(line_found, key=lambda pair: pair[0]))
        rest = plain
        for match in reversed(list(PLAIN_EQUATION.finditer(plain))):
            rest = rest[:match.start()] + " " + rest[match.end():]
        leftovers.append((rest, {value for _, c in line_found for value in [*literals(c.expression), c.stated]}))
    return found, leftovers


def reexecute_hop(question: str, solution: str, replaced: str | None, value: Fraction | None) -> Fraction:
    """The answer of the source problem with the number `replaced` (its text in the question) worth `value`."""
    finals = FINAL.findall(solution)
    if not finals:
        raise Unchecked("no_final_answer")
    answer = number(finals[-1])
    steps, leftovers = computations(solution)
    if replaced is None:
        return answer
    original = number(replaced)
    question_values = [number(m.group()) for m in QUESTION_NUMBER.finditer(FRACTION.sub(" ", question))]
    question_values += [Fraction(int(a), int(b)) for a, b in FRACTION.findall(question) if int(b)]
    if question_values.count(original) != 1:
        raise Unchecked("replaced_value_not_unique_in_question", replaced)
    if original.denominator == 1 and NUMBER_WORDS.get(int(original)) and re.search(
            rf"\b{NUMBER_WORDS[int(original)]}\b", question, re.IGNORECASE):
        raise Unchecked("replaced_value_also_in_words", replaced)
    changed: dict[Fraction, Fraction] = {original: value}
    others = set(question_values) - {original}

    def operand(literal: Fraction) -> Fraction:
        return changed.get(literal, literal)

    for step in steps:
        touched = [literal for literal in literals(step.expression) if literal in changed]
        if not touched:
            if step.stated in changed:
                # A quantity equal to a changed one computed afresh: later copies could mean either.
                raise Unchecked("one_value_two_meanings", f"{step.expression}={step.stated}")
            continue
        if evaluate(step.expression, lambda literal: literal) != step.stated:
            raise Unchecked("written_equation_does_not_hold", f"{step.expression}={step.stated}")
        if any(literal in others for literal in touched):
            raise Unchecked("changed_value_equals_another_given", step.expression)
        new = evaluate(step.expression, operand)
        if step.stated in changed and changed[step.stated] != new:
            raise Unchecked("one_value_two_meanings", f"{step.expression}={step.stated}")
        if new != step.stated:
            changed[step.stated] = new
    for text, computed in leftovers:
        for match in WORD_ARITHMETIC.finditer(text):
            written = number(match.group("after") or match.group("before"))
            # "a third of 12 ... 12*(1/3) = <<...>>" says in words what a computation on the line does.
            if written in changed and written not in computed:
                raise Unchecked("changed_value_in_word_arithmetic", match.group())
    return changed.get(answer, answer)


def literals(expression: str) -> list[Fraction]:
    return [Fraction(m.group()) for m in NUMBER_IN_TEXT.finditer(THOUSANDS.sub("", expression.replace("$", "")))]


def replaced_span(source: str, shown: str) -> tuple[str, str]:
    """(text taken out of the source question, text put in its place), from the two questions alone."""
    prefix = 0
    while prefix < min(len(source), len(shown)) and source[prefix] == shown[prefix]:
        prefix += 1
    suffix = 0
    while (suffix < min(len(source), len(shown)) - prefix
           and source[len(source) - 1 - suffix] == shown[len(shown) - 1 - suffix]):
        suffix += 1
    # Widen to whole tokens: "1,200" -> "X1" may share a leading or trailing digit with its replacement.
    start, end_source, end_shown = prefix, len(source) - suffix, len(shown) - suffix
    while start > 0 and (source[start - 1].isdigit() or (
            source[start - 1] in ".," and start > 1 and source[start - 2].isdigit())):
        start -= 1
    while end_source < len(source) and (source[end_source].isdigit() or (
            source[end_source] in ".," and end_source + 1 < len(source) and source[end_source + 1].isdigit())):
        end_source += 1
        end_shown += 1
    return source[start:end_source], shown[start:end_shown]


@dataclass
class Verdict:
    status: str  # "match", "mismatch" or "unchecked"
    reason: str = ""
    hop: int | None = None


def check_row(row: dict, raw: dict[str, dict], question_key: str = "question", answer_key: str = "answer") -> Verdict:
    """Recompute a built row from the raw source records alone. A hop whose answer stays the same when the
    number it takes changes is a mismatch too: the chain would not need that hop's predecessor."""
    previous: Fraction | None = None
    position = 0
    try:
        for position, hop in enumerate(row["hops"]):
            record = raw[hop["source_id"]]
            question, solution = record[question_key], record[answer_key]
            if hop["question"] == question:
                if position > 0:
                    return Verdict("mismatch", f"hop {position} does not take the previous answer")
                previous = reexecute_hop(question, solution, None, None)
            else:
                taken, put = replaced_span(question, hop["question"])
                if not QUESTION_NUMBER.fullmatch(taken):
                    return Verdict("mismatch", f"hop {position} replaces {taken!r}, not a number")
                if position == 0:
                    if not NUMBER_IN_TEXT.fullmatch(put):
                        return Verdict("mismatch", f"segment start holds {put!r}, not a number")
                    value = Fraction(put)
                elif put != f"X{position}":
                    return Verdict("mismatch", f"hop {position} shows {put!r} in place of X{position}")
                else:
                    value = previous
                previous = reexecute_hop(question, solution, taken, value)
                other = reexecute_hop(question, solution, taken, value + 1)
                if other == previous:
                    return Verdict("mismatch", f"hop {position}: the answer does not depend on the number replaced")
            if Fraction(hop["answer"]) != previous:
                return Verdict("mismatch", f"hop {position}: stored {hop['answer']}, recomputed {previous}")
    except Unchecked as why:
        return Verdict("unchecked", why.reason, position)
    if Fraction(row["answer"]) != previous:
        return Verdict("mismatch", f"row answer {row['answer']}, recomputed {previous}")
    return Verdict("match")
