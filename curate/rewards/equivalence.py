"""Math-object equivalence (math-verify) under our own time bound, safe to call from any thread.

math-verify bounds its own work with SIGALRM, which only works in the main thread of the main
interpreter; reward functions run in trainer threads and worker processes. So the library's
timeouts are switched off and the bound is ours: each check runs in a long-lived worker process
that is killed and replaced when it exceeds `timeout` (sympy can spin for minutes on input such as
`9^{9^{9^9}}`).

A verdict is True / False, or None when it could not be reached (timeout, gold not parseable).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import re
import select
import subprocess
import sys
import tempfile
import threading
import unicodedata
from fractions import Fraction
from functools import lru_cache
from pathlib import Path

from curate.errors import CurateError

DEFAULT_TIMEOUT = 5.0
STARTUP_TIMEOUT = 120.0
# Text answers (names, days, "infinitely many") and letters are compared as normalized text first: sympy
# would read "Tuesday" as a product of seven symbols.
_TEXT_COMMANDS = re.compile(r"\\(?:text|textbf|mathrm|mathbf|operatorname)\s*\{([^{}]*)\}")
_SPACING = re.compile(r"\\[,;:! ]|\\q?quad|~")
_WORD = re.compile(r"[a-z]{2,}")
# A number then its unit: "72 clips", "9.8 m/s^2", "20 cm3", "72 km/h", "1200 m ^ 2", "50 μN", "0.115 M", "7 kΩ". A
# single letter counts only as a metric unit (metre, gram, second, litre, hour, kelvin, newton, joule, watt, volt,
# ampere, coulomb, farad, tesla, molar, ohm): "2 x^2" is an expression, not 2 of something.
_LEADING_NUMBER = re.compile(
    r"^(-?\d[\d,]*(?:\.\d+)?)\s+(?:[A-Za-z°μΩ]{2,}|[mgslhKNJWVACFTMΩ](?![A-Za-z]))[A-Za-z°μΩ/ ]*"
    r"(?:\s*\^?\s*\{?[23]\}?|[²³])?(?:/[A-Za-z]+)*$")
# Digit groups written with thin spaces or braces: "864\,000", "864{,}000", MATH's "16,\!386.20".
_DIGIT_GROUP = re.compile(r"(?<=\d)(?:\\,|\{,\}|\\ |~)(?=\d{3}\b)")
_NEGATIVE_SPACE = re.compile(r"(?<=[\d,])\\!(?=\d)")
# A percent sign left unescaped is a LaTeX comment to the parser ("40%" reads as 40, "40% of" as nothing); a spelled
# percent is the sign.
_PERCENT = re.compile(r"(?<=\d)\s*(?:(?<!\\)%|\\?\s*(?:percent(?:age)?|pct)\b)", re.IGNORECASE)
# Decimal commas. A comma with exactly three digits after it groups thousands ("1,234" = 1234); a lone number with one
# comma followed by one, two or four and more digits, or led by a zero ("2,74", "1000,99", "0,111"), writes a decimal
# (2.74). It is read so only where the plain reading fails and the other side is one decimal number.
_DECIMAL_COMMA = re.compile(r"^(-?)(?:(0),(\d+)|([1-9]\d*),(\d{1,2}|\d{4,}))$")
_DECIMAL = re.compile(r"^-?\d*\.\d+$")
# A percentage on one side only ("25\%" against 25): the sign is the unit of the number the other side states.
_PERCENTAGE = re.compile(r"^\s*\$?\s*(-?\d[\d,]*(?:\.\d+)?|-?\.\d+)\s*\\%\s*\$?\s*$")
# Digit groups written with plain commas inside a larger answer, "1/40,000", "(3,034, 3,466)" (math-verify reads a
# lone "3,012,121" but not these): a group is 1-3 digits, not led by 0, then one or more ",ddd".
_COMMA_GROUPS = re.compile(r"(?<![\d.,])[1-9]\d{0,2}(?:,\d{3})+(?![\d]|,\d)")
# The unicode fraction slash ("5⁄3", what NFKC makes of "⅓") and division slash: math-verify reads only "5".
_SLASHES = str.maketrans({"\u2044": "/", "\u2215": "/"})


class CheckerUnavailableError(CurateError, RuntimeError):
    """No answer can be checked here (math-verify missing, its worker unable to start); the message says the fix."""


# A repeating decimal, "0.\overline{7}" or "1.2\overline{36}": math-verify reads the bar as nothing.
_REPEATING = re.compile(r"(-?)(\d*)\.(\d*)\\overline\s*\{(\d+)\}")


def _repeating(match: re.Match) -> str:
    sign, whole, fixed, period = match.groups()
    value = Fraction(int(whole or 0)) + (Fraction(int(fixed), 10 ** len(fixed)) if fixed else 0) + Fraction(
        int(period), (10 ** len(period) - 1) * 10 ** len(fixed))
    return f"{sign}\\frac{{{value.numerator}}}{{{value.denominator}}}"


def _plain_number(answer: str) -> str:
    answer = _REPEATING.sub(_repeating, answer)
    return _percent(_NEGATIVE_SPACE.sub("", _DIGIT_GROUP.sub("", answer)).translate(_SLASHES))


_ORDINAL = re.compile(r"(?<=\d)\s*\^?\s*\{?\s*(?:\\text\s*\{\s*)?(?:st|nd|rd|th)\b\s*\}?\s*\}?")
_NUMBER_WORDS = {word: str(value) for value, word in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen "
    "eighteen nineteen twenty".split())}
_LEADING_WORD = re.compile(r"^\s*([A-Za-z]+)\b")


def spelled_number(answer: str) -> str:
    """The answer as a number then its unit, for the unit rule: `\\text{}` unwrapped, an ordinal suffix dropped
    ("12^{\\text{th}}\\text{ grade}" -> "12 grade"), a leading number word written in digits ("three boxes" -> "3
    boxes")."""
    answer = unicodedata.normalize("NFKC", answer)
    answer = _ORDINAL.sub("", answer)
    answer = _TEXT_COMMANDS.sub(r" \1", answer).strip()
    if (word := _LEADING_WORD.match(answer)) and word.group(1).lower() in _NUMBER_WORDS:
        answer = _NUMBER_WORDS[word.group(1).lower()] + answer[word.end() :]
    return re.sub(r"\s+", " ", answer)


def _percent(answer: str) -> str:
    return _PERCENT.sub(r"\\%", answer)


def decimal_comma(number: str) -> str | None:
    """The decimal a lone decimal-comma number writes ("2,74" -> "2.74"), None for any other text
    (see _DECIMAL_COMMA)."""
    match = _DECIMAL_COMMA.match(number.strip().strip("$").strip())
    if not match:
        return None
    sign, zero, zero_decimals, whole, decimals = match.groups()
    return f"{sign}{zero or whole}.{zero_decimals or decimals}"


def _ungrouped(answer: str) -> str:
    return _COMMA_GROUPS.sub(lambda m: m.group(0).replace(",", ""), answer)


def normalize_text(answer: str) -> str:
    answer = unicodedata.normalize("NFKC", answer)
    answer = _TEXT_COMMANDS.sub(r"\1", answer)
    answer = _SPACING.sub(" ", answer)
    answer = answer.replace("\\left", "").replace("\\right", "").replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    answer = answer.strip().strip("$").strip()
    answer = re.sub(r"\s+", "", answer.lower())
    return answer.rstrip(".")


def _parse_boxed(gold: str, answer: str) -> tuple[list, list] | bool | None:
    """Both sides parsed as a boxed answer (LaTeX, then a plain expression): None when the gold does not parse,
    False when the answer does not."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    config = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
    parsed_gold = parse("\\boxed{" + gold + "}", extraction_config=config, parsing_timeout=None)
    if not parsed_gold:
        return None
    parsed_answer = parse("\\boxed{" + answer + "}", extraction_config=config, parsing_timeout=None)
    if not parsed_answer:
        return False
    return parsed_gold, parsed_answer


def _verify_boxed(gold: str, answer: str, **comparison) -> bool | None:
    """`_parse_boxed`, then math-verify's `verify` with the comparison options given."""
    from math_verify import verify

    parsed = _parse_boxed(gold, answer)
    if not isinstance(parsed, tuple):
        return parsed
    return bool(verify(*parsed, timeout_seconds=None, **comparison))


# math-verify compares numbers rounded to 6 decimals, so 1/2004! equals 1/2006! and 1e-7 equals 2e-7. Two exact
# numbers that close must be equal (to 40 digits); where one side is a decimal, equal to a relative 1e-5 (a rounded
# decimal answer of a small exact value stays right: 0.083333 for 1/12). Numbers farther apart than the rounding were
# called equal by another rule (25 answers 25\%) and are left to it.
EXACT_DIGITS = 40
DECIMAL_RELATIVE_TOLERANCE = 1e-5
ROUNDING_WINDOW = 1e-5


def close_in_value(gold, answer) -> bool:
    """False where two numbers math-verify called equal differ beyond the tolerance above; True otherwise (and for
    anything that is not a pair of finite real numbers)."""
    import sympy

    if not (isinstance(gold, sympy.Expr) and isinstance(answer, sympy.Expr) and gold.is_number and answer.is_number):
        return True
    try:
        gold_value, answer_value = gold.evalf(EXACT_DIGITS), answer.evalf(EXACT_DIGITS)
        if not (gold_value.is_real and answer_value.is_real and gold_value.is_finite and answer_value.is_finite):
            return True
        scale = max(abs(gold_value), abs(answer_value))
        if scale == 0 or abs(gold_value - answer_value) > ROUNDING_WINDOW:
            return True
        exact = not gold.has(sympy.Float) and not answer.has(sympy.Float)
        tolerance = sympy.Float(10) ** (5 - EXACT_DIGITS) if exact else DECIMAL_RELATIVE_TOLERANCE
        return bool(abs(gold_value - answer_value) <= tolerance * scale)
    except (TypeError, ValueError, ArithmeticError):
        return True


def _verify(gold: str, answer: str) -> bool | None:
    """Runs in a worker: parse both sides as a boxed answer and compare as math objects, numbers in relative terms."""
    from math_verify import verify

    parsed = _parse_boxed(gold, answer)
    if not isinstance(parsed, tuple):
        return parsed
    # Relations against sets: "0 \le x < 3" answers "[0, 3)".
    if not verify(*parsed, timeout_seconds=None, allow_set_relation_comp=True):
        return False
    return close_in_value(parsed[0][0], parsed[1][0])


def _verify_plain(gold: str, response: str) -> bool | None:
    """math-verify as its README uses it, with nothing of ours: the gold in `$...$`, the whole response parsed with
    the library's default extraction, the library's own comparison. The `mathverify-plain` baseline."""
    from math_verify import parse, verify

    parsed_gold = parse("$" + gold + "$", parsing_timeout=None)
    if not parsed_gold:
        return None
    parsed_answer = parse(response, parsing_timeout=None)
    if not parsed_answer:
        return False
    return bool(verify(parsed_gold, parsed_answer, timeout_seconds=None))


def _verify_strict(gold: str, answer: str) -> bool | None:
    """The on-policy audit's reference judge: the answer (the response's last `\\boxed{}`) and the gold, each parsed
    as a boxed answer, compared by math-verify's own strict comparison; none of curate's normalization (text
    equality, units, relations against sets), so that it is not the reward under audit."""
    return _verify_boxed(gold, answer, strict=True)


def parse_latex(latex: str) -> list:
    """math-verify's reading of one answer string, `$latex$` (LaTeX, then a plain expression), with the library's
    own timeout off: run it under a bound (this module's worker, or the caller's own, as the MCQA builder's whole-item
    bound does). The sympy objects it returns are what the builder classifies answer types by."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    return parse(f"${latex}$", extraction_config=[LatexExtractionConfig(), ExprExtractionConfig()], parsing_timeout=None)


def verify_parsed(gold: list, target: list) -> bool:
    """math-verify's comparison of two `parse_latex` results, timeout off (bound it as `parse_latex`)."""
    from math_verify import verify

    return verify(gold, target, timeout_seconds=None)


def _verify_same(gold: str, answer: str) -> bool | None:
    """Both strings read by `parse_latex` and compared by `verify_parsed`: how the MCQA builder compares two options,
    and so how a rewrite's stated answer is held to the row's answer (None when the gold does not parse)."""
    parsed_gold = parse_latex(gold)
    if not parsed_gold:
        return None
    parsed_answer = parse_latex(answer)
    return bool(parsed_answer and verify_parsed(parsed_gold, parsed_answer))


MODES = {"boxed": _verify, "plain": _verify_plain, "strict": _verify_strict, "same": _verify_same}


def _quiet() -> None:
    # math-verify warns on every call that its own timeout is off; that is the design here.
    logging.getLogger("math_verify").setLevel(logging.ERROR)


def serve(stdin=sys.stdin, stdout=sys.stdout) -> None:
    """Worker loop: one JSON request per line in ([gold, answer] or [gold, answer, mode]), one JSON reply per line out."""
    _quiet()
    # One check before "ready": sympy's import and the LaTeX parser's construction are no check's time.
    _verify("\\frac{1}{2}", "0.5")
    stdout.write('"ready"\n')
    stdout.flush()
    for line in stdin:
        gold, answer, *mode = json.loads(line)
        try:
            reply = ["ok", MODES[mode[0] if mode else "boxed"](gold, answer)]
        except Exception as error:  # noqa: BLE001 - whatever math-verify raises is this check's reply, not the worker's end
            reply = ["error", f"{type(error).__name__}: {error}"]
        stdout.write(json.dumps(reply) + "\n")
        stdout.flush()


class _Worker:
    """A `python -m curate.rewards.equivalence` child. A plain subprocess, not multiprocessing: it neither
    re-imports the trainer's main script nor needs a non-daemonic parent."""

    def __init__(self):
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        # stderr goes to a file, not a pipe nobody reads: a worker that cannot start says why (math-verify missing).
        self.stderr = tempfile.TemporaryFile("w+")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "curate.rewards.equivalence"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.stderr, text=True, bufsize=1, env=env,
        )
        try:
            ready = self._reply(STARTUP_TIMEOUT)
        except (TimeoutError, EOFError, ValueError) as error:
            why = self._start_failure(error)
            self.kill()
            raise CheckerUnavailableError(why) from None
        if ready != "ready":
            self.kill()
            raise CheckerUnavailableError(f"the math-verify worker answered {ready!r} instead of starting")

    def _start_failure(self, error: Exception) -> str:
        self.stderr.seek(0)
        lines = [line for line in self.stderr.read().splitlines() if line.strip()]
        last = lines[-1] if lines else (f"no reply in {STARTUP_TIMEOUT:.0f} s" if isinstance(error, TimeoutError)
                                        else "it exited without a message")
        if "math_verify" in last and "ModuleNotFoundError" in last:
            return (f"math-verify is not installed in {sys.executable}, so no answer can be checked: "
                    "pip install 'math-verify>=0.7' in the trainer's environment")
        return f"the math-verify worker ({sys.executable} -m curate.rewards.equivalence) did not start: {last}"

    def _reply(self, timeout: float):
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        if not ready:
            raise TimeoutError
        line = self.process.stdout.readline()
        if not line:
            raise EOFError("math-verify worker exited")
        return json.loads(line)

    def check(self, gold: str, answer: str, timeout: float, mode: str = "boxed") -> list:
        self.process.stdin.write(json.dumps([gold, answer, mode]) + "\n")
        self.process.stdin.flush()
        try:
            return self._reply(timeout)
        except TimeoutError:
            self.kill()
            raise

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(5)
        for stream in (self.process.stdin, self.process.stdout, self.stderr):
            stream.close()


class MathEquivalence:
    """Thread-safe equivalence checker with a per-check time bound.

    workers: processes kept warm; a check beyond that waits for a free one (waiting is not counted
    against the bound). Checks and verdicts are cached, so k samples of one answer cost one check.
    """

    def __init__(self, timeout: float = DEFAULT_TIMEOUT, workers: int | None = None):
        self.timeout = timeout
        self.capacity = workers or min(4, os.cpu_count() or 1)
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._slots = threading.Semaphore(self.capacity)
        self.timeouts = 0
        self.errors = 0
        self._cache = lru_cache(maxsize=65_536)(self._check)

    def equivalent(self, gold: str, answer: str) -> bool | None:
        if gold is None or answer is None:
            return None
        gold, answer = str(gold).strip(), str(answer).strip()
        if not gold:
            return None
        if not answer:
            return False
        text_gold, text_answer = normalize_text(gold), normalize_text(answer)
        if text_gold == text_answer:
            return True
        if _WORD.fullmatch(text_gold) and _WORD.fullmatch(text_answer):
            # Two words ("tuesday", "qxls"): sympy would read them as commuting products of letters.
            return False
        gold = _percent(gold)
        verdict = self._cache(gold, _plain_number(answer))
        if verdict is False and (ungrouped := _ungrouped(_plain_number(answer))) != _plain_number(answer):
            # Tried second: "(1,234)" may be a pair, and is read as one first.
            verdict = self._cache(gold, ungrouped)
        if verdict is False:
            # Tried after both: "2,74" for 2.74 (or a gold written so), where the other side is one decimal number.
            if (decimal := decimal_comma(answer)) and _DECIMAL.match(text_gold.strip("$")):
                verdict = self._cache(gold, decimal)
            elif (decimal := decimal_comma(gold)) and _DECIMAL.match(normalize_text(answer)):
                verdict = self._cache(decimal, _plain_number(answer))
        if verdict is False:
            gold_percentage, answer_percentage = _PERCENTAGE.match(gold), _PERCENTAGE.match(_plain_number(answer))
            if bool(gold_percentage) != bool(answer_percentage):
                verdict = self._cache(gold_percentage.group(1) if gold_percentage else gold,
                                      answer_percentage.group(1) if answer_percentage else _plain_number(answer))
        if verdict is False and (number := _LEADING_NUMBER.match(spelled_number(answer))):
            # "72 clips", "9.8 m/s^2": a number followed by a unit math-verify does not know.
            verdict = self._cache(gold, number.group(1))
        return verdict

    def plain(self, gold: str, response: str) -> bool | None:
        """math-verify's own extraction and comparison over a whole response (no normalization of ours), under the
        same time bound: the `mathverify-plain` baseline reward."""
        if gold is None or response is None or not str(gold).strip():
            return None
        if not str(response).strip():
            return False
        return self._cache(str(gold).strip(), str(response), "plain")

    def strict(self, gold: str, answer: str) -> bool | None:
        """math-verify's parse and strict verify of one extracted answer against the gold, nothing of curate's around
        it, under the same time bound: the reference judge of `audit-verifier --policy`."""
        if gold is None or answer is None or not str(gold).strip():
            return None
        if not str(answer).strip():
            return False
        return self._cache(str(gold).strip(), str(answer).strip(), "strict")

    def same(self, gold: str, answer: str) -> bool | None:
        """`parse_latex` + `verify_parsed` of two answer strings (the MCQA builder's comparison of options), under
        the same time bound; None when it timed out or the gold does not parse."""
        if gold is None or answer is None or not str(gold).strip():
            return None
        if not str(answer).strip():
            return False
        return self._cache(str(gold).strip(), str(answer).strip(), "same")

    def _check(self, gold: str, answer: str, mode: str = "boxed") -> bool | None:
        with self._slots:
            try:
                worker = self._idle.get_nowait()
            except queue.Empty:
                # A worker that cannot start raises CheckerUnavailableError: every check would fail alike, and a
                # reward that scored them all 0.0 would train on noise without a word.
                worker = _Worker()
            try:
                status, value = worker.check(gold, answer, self.timeout, mode)
            except TimeoutError:
                self.timeouts += 1
                return None
            except (EOFError, OSError, ValueError):
                # The worker died (out of memory, killed): this check is lost, the next gets a fresh worker.
                worker.kill()
                self.errors += 1
                return None
            self._idle.put(worker)
        if status == "error":
            self.errors += 1
            return None
        return value

    def forget(self) -> None:
        """Drops the cached verdicts (a benchmark's cold start; the workers stay)."""
        self._cache.cache_clear()

    def warm(self, workers: int | None = None) -> None:
        """Starts workers now, so that no check's time includes a worker's startup."""
        count = min(workers or self.capacity, self.capacity) - self._idle.qsize()
        if count <= 0:
            return
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(count) as pool:
            for worker in pool.map(lambda _: _Worker(), range(count)):
                self._idle.put(worker)

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait().kill()
            except queue.Empty:
                return


_shared: MathEquivalence | None = None
_shared_lock = threading.Lock()


def shared_checker() -> MathEquivalence:
    """The process-wide checker the registered rewards use (timeout from CURATE_REWARD_TIMEOUT, seconds)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = MathEquivalence(timeout=float(os.environ.get("CURATE_REWARD_TIMEOUT", DEFAULT_TIMEOUT)))
        return _shared


if __name__ == "__main__":
    serve()
