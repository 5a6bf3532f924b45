"""`llm_v1`: an instruction-tuned model counts each behavior in a document.

This module is the model-facing half: versioned prompt files, truncation by the model's own
tokenizer, request payloads, and a tolerant answer parser. Sending the requests is the job of
`curate.pipelines.llm_tag` (datatrove's InferenceRunner), because a server that is spawned,
health-checked, batched and checkpointed cannot live behind a per-batch `classify` call.

Layout: system prompt (identical for every request), then the document, then the question. The
four per-behavior requests about one document therefore share everything up to the question,
and a prefix-caching server (vLLM, SGLang) prefills the document once instead of four times.

An answer that cannot be read gives a null count with `error="parse: ..."`, never 0.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from curate.behaviors import BEHAVIOR_NAMES, UnknownBehaviorError, parse_behavior
from curate.classifiers.base import Classifier, register
from curate.errors import InputError, OptionError
from curate.hf_tokenizers import load_tokenizer
from curate.options import DEFAULT_MAX_DOC_TOKENS
from curate.schema import Labels

PROMPTS_DIR = Path(__file__).parent / "prompts" / "llm_v1"
MODES = ("per-behavior", "joint")
JOINT = "joint"
# Generous for {"count": 12} plus the prose some models add anyway; short enough to stop a
# model that rambles from costing much.
MAX_ANSWER_TOKENS = {"per-behavior": 48, "joint": 96}
# Tokens that may merge or split where the document meets the prompt around it.
PROMPT_MARGIN = 16
# Chat-template options a model family needs for this task where it is known: Qwen3 thinks by default, and a
# 48-token answer budget then ends inside <think>.
FAMILY_CHAT_TEMPLATE_KWARGS = {"qwen3": {"enable_thinking": False}, "qwen3_moe": {"enable_thinking": False}}
# A count above this is a misread number (a year, a page), not a count of instances.
MAX_PLAUSIBLE_COUNT = 1000


def read_prompt_files(directory: Path) -> tuple[dict[str, str], str]:
    """A versioned prompt folder: its *.txt files by stem, and a version hashed from names and contents.

    `document.txt` must hold the {document} placeholder, so that every prompt puts the document first."""
    files = sorted(directory.glob("*.txt"))
    if not files:
        raise FileNotFoundError(f"no prompt files in {directory}")
    digest = hashlib.sha256()
    texts = {}
    for path in files:
        content = path.read_text(encoding="utf-8")
        digest.update(path.name.encode() + b"\0" + content.encode() + b"\0")
        texts[path.stem] = content.strip()
    if "{document}" not in texts.get("document", ""):
        raise InputError(f"{directory}/document.txt must contain the placeholder {{document}}")
    return texts, f"{directory.name}-{digest.hexdigest()[:12]}"


@dataclass(frozen=True)
class PromptSet:
    system: str
    document: str
    questions: dict[str, str]  # behavior name or "joint" -> question
    version: str

    @classmethod
    def load(cls, directory: Path = PROMPTS_DIR) -> PromptSet:
        texts, version = read_prompt_files(directory)
        questions = {key: texts[f"question_{key}"] for key in (*BEHAVIOR_NAMES, JOINT)}
        return cls(texts["system"], texts["document"], questions, version)

    def messages(self, document: str, question_key: str, instruction_first: bool = False) -> list[dict]:
        block = self.document.replace("{document}", document)
        question = self.questions[question_key]
        # instruction_first exists only so bench/prompt_economy.py can price the layout it replaces.
        user = f"{question}\n\n{block}" if instruction_first else f"{block}\n\n{question}"
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]


@dataclass(frozen=True)
class DocumentPrompt:
    """One versioned prompt folder (system, document and, where there is one, question): the judges' prompts.

    Fields fill their {name} placeholders in the document block and the question, in the order given, before the
    document goes in, and by plain replacement, not str.format: braces in a document or a field stay text."""

    system: str
    document: str
    question: str | None
    version: str

    @classmethod
    def read(cls, directory: Path):
        return cls.from_texts(*read_prompt_files(directory))

    @classmethod
    def from_texts(cls, texts: dict[str, str], version: str):
        return cls(texts["system"], texts["document"], texts.get("question"), version)

    def render(self, document: str, **fields: str) -> list[dict]:
        block, question = self.document, self.question
        for name, value in fields.items():
            block = block.replace("{" + name + "}", value)
            question = question and question.replace("{" + name + "}", value)
        block = block.replace("{document}", document)
        # Document first, question after: a prefix cache shares the document between the questions asked of it.
        user = f"{block}\n\n{question}" if question is not None else block
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]


def count_schema(question_key: str) -> dict:
    keys = ["count"] if question_key != JOINT else list(BEHAVIOR_NAMES)
    return {
        "type": "object",
        "properties": {k: {"type": "integer", "minimum": 0} for k in keys},
        "required": keys,
        "additionalProperties": False,
    }


def question_keys(mode: str) -> list[str]:
    if mode not in MODES:
        raise OptionError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    return [JOINT] if mode == JOINT else list(BEHAVIOR_NAMES)


def build_payload(
    prompts: PromptSet, document: str, question_key: str, mode: str, structured: bool, max_answer_tokens: int | None = None,
    chat_template_kwargs: dict | None = None,
) -> dict:
    payload = {
        "messages": prompts.messages(document, question_key),
        "max_tokens": max_answer_tokens or MAX_ANSWER_TOKENS[mode],
        "temperature": 0.0,
    }
    if chat_template_kwargs:
        # vLLM and SGLang pass these to the chat template (Qwen3: {"enable_thinking": false}); sent only when set,
        # since OpenAI's own API refuses unknown fields.
        payload["chat_template_kwargs"] = dict(chat_template_kwargs)
    if structured:
        # OpenAI-style structured output; vLLM and SGLang map it to guided decoding.
        payload["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": f"{question_key}_count", "schema": count_schema(question_key), "strict": True},
        }
    return payload


def model_config(model: str):
    """The model's config when it is on disk or in the local cache, else None (nothing is fetched for it)."""
    try:
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(model, local_files_only=True)
    except Exception:  # noqa: BLE001 - any unreadable config means "unknown here"; vLLM checks it again at start
        return None


def model_family(model: str) -> str | None:
    config = model_config(model)
    if config is not None and getattr(config, "model_type", None):
        return config.model_type
    name = Path(model).name.lower()
    return "qwen3" if name.startswith("qwen3") else None


def default_chat_template_kwargs(model: str) -> dict:
    """The chat-template options this task needs for the model's family ({} where none is known)."""
    return dict(FAMILY_CHAT_TEMPLATE_KWARGS.get(model_family(model) or "", {}))


def model_context_limit(model: str) -> int | None:
    """The longest context the model's config declares, or None when the config is not available here."""
    config = model_config(model)
    for candidate in (config, getattr(config, "text_config", None)):
        limit = getattr(candidate, "max_position_embeddings", None)
        if isinstance(limit, int) and limit > 0:
            return limit
    return None


# --------------------------------------------------------------------------------------------- #
# Truncation
# --------------------------------------------------------------------------------------------- #
class Truncator:
    """Cuts a document to at most `max_tokens` tokens of the model's tokenizer, at the last newline."""

    def __init__(self, tokenizer_name_or_path: str, max_tokens: int = DEFAULT_MAX_DOC_TOKENS):
        if max_tokens < 16:
            raise OptionError("--max-doc-tokens must be at least 16")
        self.tokenizer_name_or_path = tokenizer_name_or_path
        self.max_tokens = max_tokens

    @cached_property
    def tokenizer(self):
        try:
            tokenizer = load_tokenizer(self.tokenizer_name_or_path)
        except Exception as error:
            raise OptionError(
                f"cannot load the tokenizer {self.tokenizer_name_or_path!r} to truncate documents "
                f"({type(error).__name__}: {error}). For an endpoint serving a model whose tokenizer is not on the "
                "hub or on disk, pass --tokenizer with a compatible one."
            ) from error
        if not tokenizer.is_fast:
            raise OptionError(f"tokenizer {self.tokenizer_name_or_path!r} has no fast version; offsets are needed to cut text")
        return tokenizer

    def __call__(self, text: str) -> tuple[str, bool, int]:
        """Returns (text, truncated, tokens kept)."""
        # A token holds at least one character: text this short cannot exceed the limit.
        if len(text) <= self.max_tokens:
            return text, False, len(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        encoded = self.tokenizer(
            text, add_special_tokens=False, return_offsets_mapping=True, truncation=True, max_length=self.max_tokens + 1
        )
        offsets = encoded["offset_mapping"]
        if len(offsets) <= self.max_tokens:
            return text, False, len(offsets)
        end = offsets[self.max_tokens - 1][1]
        cut = text.rfind("\n", 0, end)
        # No line break in the window (one giant line): cut at the token boundary rather than drop it all.
        kept = text[: cut + 1] if cut > 0 else text[:end]
        return kept, True, len(self.tokenizer(kept, add_special_tokens=False)["input_ids"])


# --------------------------------------------------------------------------------------------- #
# Parsing
# --------------------------------------------------------------------------------------------- #
THINK = re.compile(r"<think>.*?(</think>|$)", re.IGNORECASE | re.DOTALL)
THINK_END = re.compile(r"</think>", re.IGNORECASE)
THINK_START = re.compile(r"<think>", re.IGNORECASE)
FENCE = re.compile(r"```[a-zA-Z]*")
COUNT_TAG = re.compile(r"<\s*count\s*>\s*(-?\d+)\s*<\s*/\s*count\s*>", re.IGNORECASE)
LABELLED = re.compile(
    r"(?:\bcount|\bnumber of (?:instances|times)|\banswer|\btotal)\s*(?:is|=|:|-)?\s*\**\s*(-?\d+)\b", re.IGNORECASE
)
BARE = re.compile(r"^\W*(-?\d+)\W*$")
WORDS = {"zero": 0, "none": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
         "nine": 9, "ten": 10}
BARE_WORD = re.compile(r"^\W*(" + "|".join(WORDS) + r")\W*$", re.IGNORECASE)
JOINT_LINE = re.compile(r"([a-z][a-z _-]+?)\W*[:=]\s*\**\s*(-?\d+)\b", re.IGNORECASE)


class ParseError(ValueError):
    pass


def clean_answer(answer: str) -> str:
    """The answer without its reasoning: what follows the last </think> (a chat template that opens <think> in
    the prompt leaves only the closing tag in the answer), with any complete <think>...</think> removed."""
    closes = list(THINK_END.finditer(answer))
    if closes:
        answer = answer[closes[-1].end():]
    elif THINK_START.search(answer):
        raise ParseError(
            "the model was still thinking when the answer budget ran out (no </think>); turn thinking off with "
            "--chat-template-kwargs '{\"enable_thinking\": false}' or raise --max-answer-tokens")
    return FENCE.sub("", THINK.sub("", answer)).replace("```", "").strip()


def json_objects(text: str):
    """Every top-level {...} in text that json.loads accepts (answers often wrap JSON in prose)."""
    depth, start = 0, -1
    for i, ch in enumerate(text):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                try:
                    value = json.loads(text[start : i + 1])
                except json.JSONDecodeError:
                    # Models write single-quoted pseudo-JSON; only quotes are repaired, nothing is evaluated.
                    try:
                        value = json.loads(text[start : i + 1].replace("'", '"'))
                    except json.JSONDecodeError:
                        continue
                if isinstance(value, dict):
                    yield value


FLAT_JSON = re.compile(r"\{[^{}]*\}", re.DOTALL)
TRUE_WORDS, FALSE_WORDS = frozenset({"true", "yes", "1"}), frozenset({"false", "no", "0"})


def flat_json_objects_last_first(text: str) -> Iterator[dict]:
    """The flat {...} objects (no braces inside) of text that json.loads reads as objects, the last one first: a
    judge's verdict is the last object it wrote, after any example or restatement in its prose. Unlike
    json_objects, nothing is repaired."""
    for candidate in reversed(FLAT_JSON.findall(text)):
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            yield value


def read_flag(value: object, true_words=TRUE_WORDS, false_words=FALSE_WORDS) -> bool | None:
    """A yes/no field of a judge's JSON: a boolean, or an int or string among the words; anything else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, str)) and str(value).strip().lower() in true_words | false_words:
        return str(value).strip().lower() in true_words
    return None


def _as_count(value: object) -> int:
    if isinstance(value, bool):
        raise ParseError(f"a boolean ({value}) is not a count")
    if isinstance(value, str):
        stripped = value.strip()
        if stripped.lower() in WORDS:
            return WORDS[stripped.lower()]
        if not re.fullmatch(r"-?\d+", stripped):
            raise ParseError(f"{value!r} is not a count")
        value = int(stripped)
    if isinstance(value, float):
        if not value.is_integer():
            raise ParseError(f"{value} is not a whole number")
        value = int(value)
    if not isinstance(value, int):
        raise ParseError(f"{type(value).__name__} is not a count")
    if value < 0:
        raise ParseError(f"negative count {value}")
    if value > MAX_PLAUSIBLE_COUNT:
        raise ParseError(f"implausible count {value}")
    return value


def answer_snippet(answer: str) -> str:
    flat = " ".join(answer.split())
    return repr(flat[:80] + ("…" if len(flat) > 80 else ""))


def parse_count(answer: str, behavior: str | None = None) -> int:
    """One behavior's count from a model answer; raises ParseError with the reason."""
    text = clean_answer(answer)
    if not text:
        raise ParseError("empty answer")
    for obj in json_objects(text):
        for key in ("count", behavior):
            if key and key in obj:
                return _as_count(obj[key])
        if len(obj) == 1:
            return _as_count(next(iter(obj.values())))
    for pattern in (COUNT_TAG, BARE, BARE_WORD):
        if match := pattern.search(text):
            return _as_count(match.group(1))
    labelled = {m.group(1) for m in LABELLED.finditer(text)}
    if behavior:
        # Models often echo the question ("Count: backtracking") and put the number after its name.
        name = r"[\s_-]*".join(map(re.escape, behavior.split("_")))
        labelled |= {m.group(1) for m in re.finditer(rf"\b{name}\b\W{{0,3}}(?:is|=|:|-)?\s*\**\s*(-?\d+)\b", text, re.IGNORECASE)}
    if len(labelled) == 1:
        return _as_count(labelled.pop())
    if len(labelled) > 1:
        raise ParseError(f"conflicting counts {sorted(labelled)} in {answer_snippet(answer)}")
    raise ParseError(f"no count in {answer_snippet(answer)}")


def parse_joint(answer: str) -> tuple[dict[str, int | None], list[str]]:
    """All four counts from one answer; returns (counts, problems). Unreadable ones stay None."""
    counts: dict[str, int | None] = {b: None for b in BEHAVIOR_NAMES}
    try:
        text = clean_answer(answer)
    except ParseError as error:
        return counts, [str(error)]
    problems: list[str] = []
    found: dict[str, object] = {}
    for obj in json_objects(text):
        for key, value in obj.items():
            try:
                found.setdefault(parse_behavior(str(key).replace(" ", "_")).value, value)
            except UnknownBehaviorError:
                continue
    if not found:
        for match in JOINT_LINE.finditer(text):
            try:
                found.setdefault(parse_behavior(match.group(1).strip().replace(" ", "_")).value, match.group(2))
            except UnknownBehaviorError:
                continue
    for behavior in BEHAVIOR_NAMES:
        if behavior not in found:
            problems.append(f"{behavior}: missing")
            continue
        try:
            counts[behavior] = _as_count(found[behavior])
        except ParseError as error:
            problems.append(f"{behavior}: {error}")
    if not found:
        problems = [f"no counts in {answer_snippet(answer)}"]
    return counts, problems


def labels_from_answers(answers: dict[str, str]) -> Labels:
    """answers: question key ("joint" or a behavior) -> answer text. Request failures are not here."""
    counts: dict[str, int | None] = {b: None for b in BEHAVIOR_NAMES}
    problems: list[str] = []
    if JOINT in answers:
        counts, problems = parse_joint(answers[JOINT])
    else:
        for behavior, answer in answers.items():
            try:
                counts[behavior] = parse_count(answer, behavior)
            except ParseError as error:
                problems.append(f"{behavior}: {error}")
    return Labels(counts=counts, error=("parse: " + "; ".join(problems)) if problems else None)


# --------------------------------------------------------------------------------------------- #
# The registered classifier
# --------------------------------------------------------------------------------------------- #
class LLMClassifier(Classifier):
    """Configuration of an LLM labelling run: model, mode, prompts, truncation. Requests go through
    `curate.pipelines.llm_tag.run_llm_tagging` (`curate tag-llm`), which owns the server."""

    name = "llm_v1"
    prompts_dir = PROMPTS_DIR
    answer_tokens = MAX_ANSWER_TOKENS  # per mode, unless max_answer_tokens is given

    def __init__(
        self,
        model: str,
        mode: str = "per-behavior",
        structured: bool = False,
        max_doc_tokens: int = DEFAULT_MAX_DOC_TOKENS,
        tokenizer: str | None = None,
        max_answer_tokens: int | None = None,
        chat_template_kwargs: dict | None = None,
    ):
        if not model:
            raise OptionError(f"{self.name} needs a model (a hub name or a local directory)")
        question_keys(mode)
        self.model = model
        self.mode = mode
        self.structured = structured
        self.max_answer_tokens = max_answer_tokens or self.answer_tokens[mode]
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.prompts = PromptSet.load(self.prompts_dir)
        self.prompt_version = self.prompts.version
        self.truncator = Truncator(tokenizer or model, max_doc_tokens)

    def requests(self, text: str) -> tuple[list[tuple[str, dict]], bool, int]:
        """The payloads for one document: ([(question key, payload)], truncated, document tokens)."""
        document, truncated, n_tokens = self.truncator(text)
        payloads = [
            (key, build_payload(self.prompts, document, key, self.mode, self.structured, self.max_answer_tokens,
                                self.chat_template_kwargs))
            for key in question_keys(self.mode)
        ]
        return payloads, truncated, n_tokens

    def read_answers(self, answers: dict[str, str], document: str) -> Labels:
        """One document's labels from its answers (question key -> text). llm_v1 reads counts, so the document is
        unused here; a version that quotes the document (llm_spans_v1) aligns its quotes to it."""
        return labels_from_answers(answers)

    def prompt_overhead(self) -> int:
        """Tokens a request holds besides the document, measured under the model's tokenizer and chat template
        (system prompt, document frame, the longest question, role markers, generation prompt), plus a margin
        for tokens merging across the document's edges."""
        tokenizer = self.truncator.tokenizer
        longest = 0
        for key in question_keys(self.mode):
            messages = self.prompts.messages("", key)
            if getattr(tokenizer, "chat_template", None):
                encoded = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True,
                                                        **self.chat_template_kwargs)
                ids = encoded["input_ids"] if hasattr(encoded, "keys") else encoded
                n = len(ids)
            else:  # no template here: contents plus a few tokens per message for the server's role markers
                n = sum(len(tokenizer(m["content"], add_special_tokens=False)["input_ids"]) + 8 for m in messages)
            longest = max(longest, n)
        return longest + PROMPT_MARGIN

    def context_budget(self) -> int:
        """Document + prompt + answer: the context every request of this run fits in."""
        return self.truncator.max_tokens + self.prompt_overhead() + self.max_answer_tokens

    def classify(self, texts: Sequence[str]) -> list[Labels]:
        raise RuntimeError(
            "llm_v1 sends its requests through datatrove's InferenceRunner, which owns the model server; "
            "it cannot run inside the batch tagger. Use `curate tag-llm --model M --backend ...` "
            "(or run_llm_tagging in curate.pipelines.llm_tag)."
        )


@register("llm_v1")
def make_llm_classifier(model: str | None = None, **options) -> LLMClassifier:
    return LLMClassifier(model or "", **options)
