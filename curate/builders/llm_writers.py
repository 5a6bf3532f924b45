"""LLM writers: a teacher model writes Countdown priming traces, and rewrites multiple-choice stems as
open-answer questions with a second model pass as judge (the Big-Math recipe).

Both run through the LLM backends of `curate.pipelines.llm.server` (datatrove's InferenceRunner: `vllm
serve`, an OpenAI-compatible endpoint, or `transformers serve`), one job per call, with chunk
checkpoints and the request cache under a work directory: the job's configuration is recorded there
(curate.pipelines.llm.job), so that a rerun of the same job resumes without re-requesting finished documents,
another job in that directory is refused with the fix, and `overwrite` starts it over. Rollouts only send requests; everything a model says is parsed
afterwards in the calling process, by plain functions, and nothing it says is executed:
- traces: `<think>` … `</think>` and the last `<answer>` … `</answer>`; the answer is checked by the
  Countdown AST verifier and must be correct (or, for `--answers incorrect`, well-formed and wrong);
  the caller then runs the behavior check on the think text;
- reformulations: the rewrite gives a question and its final answer, or "N/A"; the final answer must
  verify against the gold with math-verify (gold first), the new stem must pass the option-dependence
  rules, and the judge must say PASS.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from datatrove.data import Document
from datatrove.pipeline.inference.servers.base import ServerError
from datatrove.pipeline.inference.types import InferenceError
from datatrove.pipeline.writers.jsonl import JsonlWriter

from curate.behaviors import Behavior
from curate.builders.trace_templates import teacher_messages
from curate.classifiers.llm import json_objects
from curate.console import ProgressBar
from curate.errors import CurateError
from curate.pipelines.llm.job import LLMJobFolder, claim_job, run_llm_job
from curate.pipelines.llm.options import ServerOptions
from curate.pipelines.llm.server import inference_config
from curate.puzzles.countdown import Problem, check_expression
from curate.rewards.equivalence import shared_checker

RESULTS_KEY = "curate_llm_writer"
REQUEST_KEY = "curate_request"
THINK_BLOCK = re.compile(r"<think>(.*?)</think>", re.DOTALL | re.IGNORECASE)
ANSWER_BLOCK = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")


class LLMWriterError(CurateError, ValueError):
    pass


@dataclass(frozen=True)
class LLMOptions(ServerOptions):
    """Which model writes and where it runs (ServerOptions), and how it samples."""

    # 1, not ServerOptions' None (the GPUs per task): mcqa's output claim records these options whole, and datasets
    # reformulated before must stay up to date. Neither mcqa nor priming runs on GPUs of its own (no --gpus-per-task).
    tp: int | None = 1
    max_tokens: int = 2048
    temperature: float = 0.7

    def validate(self, gpus_per_task: int = 0) -> None:
        if not self.model:
            raise LLMWriterError("the LLM writer needs --model (a hub name or a local directory)")
        if self.max_tokens < 1:
            raise LLMWriterError("--max-tokens must be positive")
        super().validate(gpus_per_task)

    def context_tokens(self) -> int:
        """One request: the prompt (under 2k tokens here) and the answer."""
        return self.max_tokens + 2048


# --------------------------------------------------------------------------------------------- #
# One generation job through InferenceRunner
# --------------------------------------------------------------------------------------------- #
@contextmanager
def _progress_context(total: int, description: str, progress: bool):
    with ProgressBar(description, total=total, enabled=progress, unit="item") as bar:
        yield {"bar": bar}


def _request_failure(error: BaseException) -> dict:
    if isinstance(error, (ServerError, asyncio.CancelledError)):
        raise error  # the server is gone: the task fails, and a rerun resumes from the checkpoint
    message = error.error if isinstance(error, InferenceError) else error
    return {"error": f"{type(error).__name__}: {str(message)[:300]}"}


def _answer(result) -> dict:
    return {"text": result.text, "finish_reason": result.finish_reason,
            "completion_tokens": int((result.usage or {}).get("completion_tokens") or 0)}


async def single_rollout(document, generate, bar) -> dict:
    """One request per document (a trace)."""
    try:
        answer = _answer(await generate(dict(document.metadata[REQUEST_KEY])))
    except Exception as error:  # noqa: BLE001 - a failed request becomes a refusal reason; _request_failure re-raises a dead server
        answer = _request_failure(error)
    bar.advance()
    return answer


async def reformulate_rollout(document, generate, bar) -> dict:
    """Rewrite, then (unless the rewrite is N/A or unreadable) judge that rewrite."""
    request = document.metadata[REQUEST_KEY]
    out: dict = {}
    try:
        out["rewrite"] = _answer(await generate(rewrite_payload(request, request["options"])))
    except Exception as error:  # noqa: BLE001 - a failed request becomes a refusal reason; _request_failure re-raises a dead server
        out["rewrite"] = _request_failure(error)
    rewrite = out["rewrite"]
    if "text" in rewrite:
        parsed = parse_rewrite(rewrite["text"])
        if isinstance(parsed, Rewrite):
            try:
                out["judge"] = _answer(await generate(judge_payload(request, parsed, request["options"])))
            except Exception as error:  # noqa: BLE001 - as above
                out["judge"] = _request_failure(error)
    bar.advance()
    return out


JOB_RECORD = "job.json"


def run_generation(requests: dict[str, dict], rollout, options: LLMOptions, workdir: str | Path,
                   description: str, progress: bool = True, overwrite: bool = False) -> dict[str, dict]:
    """Send every request (document id -> request) through one InferenceRunner job; returns id -> result.
    A document whose request the server refused as malformed is absent from the result. WORKDIR holding this same
    job resumes it (finished documents are not requested again); holding another (other requests, model or
    sampling) is refused with the fix, unless `overwrite`, which removes it and starts over."""
    options.validate()
    workdir = Path(workdir)
    output = workdir / "results"
    # The requests by digest: the record names what differs without copying every prompt into it.
    digest = hashlib.sha256(json.dumps(requests, sort_keys=True, default=str).encode()).hexdigest()
    claim_job(workdir / JOB_RECORD, {"model": options.model, "temperature": options.temperature,
                                     "max_tokens": options.max_tokens, "documents": len(requests), "requests": digest},
              f"LLM results ({description})", "pass --overwrite to write them again", overwrite=overwrite)
    documents = [Document(text=key, id=key, metadata={REQUEST_KEY: request}) for key, request in requests.items()]
    folder = LLMJobFolder(workdir)
    run_llm_job(
        folder, [documents], rollout_fn=rollout, metadata_key=RESULTS_KEY,
        config=inference_config(options, folder.server_logs, context_tokens=options.context_tokens()),
        writer=JsonlWriter(str(output), output_filename="${rank}_${chunk_index}.jsonl", compression=None),
        shared_context=partial(_progress_context, len(documents), description, progress),
        job_name=f"curate-{description.replace(' ', '-')}", what=description)
    results: dict[str, dict] = {}
    for path in sorted(output.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            rollouts = record["metadata"].get(RESULTS_KEY) or []
            if rollouts:
                results[record["id"]] = rollouts[0]
    return results


# --------------------------------------------------------------------------------------------- #
# Countdown traces
# --------------------------------------------------------------------------------------------- #
@dataclass
class LLMTrace:
    think: str
    answer: str
    completion_tokens: int


def parse_trace(text: str) -> tuple[str, str]:
    """(think, answer) from a teacher's reply; raises LLMWriterError with the reason."""
    text = FENCE.sub("", (text or "").strip())
    if not text:
        raise LLMWriterError("empty reply")
    thinks = THINK_BLOCK.findall(text)
    if not thinks:
        raise LLMWriterError("no <think> … </think> block")
    if len(thinks) > 1:
        raise LLMWriterError(f"{len(thinks)} <think> blocks")
    think = thinks[0].strip()
    if not think:
        raise LLMWriterError("empty <think> block")
    if "<answer>" in think.lower():
        raise LLMWriterError("<answer> inside <think>")
    after = text[text.lower().rindex("</think>"):]
    answers = ANSWER_BLOCK.findall(after)
    if not answers:
        raise LLMWriterError("no <answer> … </answer> after </think>")
    answer = answers[-1].strip()
    if not answer:
        raise LLMWriterError("empty <answer>")
    return think, answer


def check_trace(result: dict, problem: Problem, answers: str) -> LLMTrace | str:
    """The trace, or the reason (prefixed 'llm request', 'llm truncated', 'llm parse' or 'llm answer') it is refused."""
    if "error" in result:
        return f"llm request: {result['error']}"
    if result.get("finish_reason") == "length":
        return "llm truncated: the reply hit the token limit"
    try:
        think, answer = parse_trace(result["text"])
    except LLMWriterError as error:
        return f"llm parse: {error}"
    check = check_expression(answer, problem.numbers, problem.target)
    wanted = {"correct": ("correct",), "incorrect": ("wrong",), "any": ("correct", "wrong")}[answers]
    if check.status not in wanted:
        detail = check.reason or f"evaluates to {check.value}"
        return f"llm answer: {answer[:60]!r} is {check.status} ({detail}), {answers} answers were asked for"
    return LLMTrace(think, answer, int(result.get("completion_tokens") or 0))


def trace_requests(problems: list[Problem], behaviors: frozenset[Behavior], answers: str,
                   options: LLMOptions) -> dict[str, dict]:
    return {
        f"{i:06d}": {"messages": teacher_messages(problem, behaviors, answers), "max_tokens": options.max_tokens,
                     "temperature": options.temperature}
        for i, problem in enumerate(problems)
    }


def write_llm_traces(problems: list[Problem], behaviors: frozenset[Behavior], answers: str, options: LLMOptions,
                     workdir: str | Path, progress: bool = True, overwrite: bool = False) -> list[LLMTrace | str]:
    """One teacher trace per problem, in order: an LLMTrace, or the reason there is none (WORKDIR: as in
    run_generation)."""
    requests = trace_requests(problems, behaviors, answers, options)
    results = run_generation(requests, single_rollout, options, workdir, "teacher traces", progress, overwrite)
    return [
        check_trace(results[key], problem, answers) if key in results else "llm request: refused by the server as a bad request"
        for key, problem in zip(requests, problems)
    ]


# --------------------------------------------------------------------------------------------- #
# MCQA reformulation
# --------------------------------------------------------------------------------------------- #
REWRITE_SYSTEM = """You convert multiple-choice math and science questions into open-ended questions.

Rules:
1. The open-ended question must have exactly the same final answer as the correct option.
2. It must stand on its own: no options, no letters, no "which of the following".
3. Keep every given quantity and condition; keep any instruction about the answer's form or unit.
4. Never turn it into a proof or a yes/no question, and never reveal the answer or add hints.
5. If the question cannot be converted under these rules (it depends on comparing the options, or its
   answer is not a single mathematical object), reply with exactly: N/A

Otherwise reply in this form and nothing else:
<question>the open-ended question</question>
<answer>the final answer</answer>"""

JUDGE_SYSTEM = """You check a multiple-choice question that was rewritten as an open-ended question.

PASS only if all hold:
1. The rewritten question stands on its own (no options, no letters, nothing left out that it needs).
2. Its correct final answer is exactly the correct option of the original, not another value.
3. It is not a proof, not a yes/no question, and it does not reveal or hint at the answer.
Otherwise FAIL.

Reply with JSON only: {"verdict": "PASS" or "FAIL", "reason": "one short sentence"}"""

PROMPT_VERSION = "reformulate_v1-" + hashlib.sha256((REWRITE_SYSTEM + "\0" + JUDGE_SYSTEM).encode()).hexdigest()[:12]
QUESTION_BLOCK = re.compile(r"<question>(.*?)</question>", re.DOTALL | re.IGNORECASE)
NA = re.compile(r"^\W*n\s*/\s*a\W*$", re.IGNORECASE)
VERDICT_LINE = re.compile(r"\bverdict\b\W*(pass|fail)\b", re.IGNORECASE)
BARE_VERDICT = re.compile(r"^\W*(pass|fail)\b", re.IGNORECASE)


@dataclass
class Rewrite:
    question: str
    answer: str


def _options_listing(request: dict) -> str:
    return "\n".join(f"({o['letter']}) {o['text']}" for o in request["original_options"])


def rewrite_payload(request: dict, options: dict) -> dict:
    gold = next((o["text"] for o in request["original_options"] if o["letter"] == request["gold_letter"]), "")
    user = (f"Question:\n{request['question']}\n\nOptions:\n{_options_listing(request)}\n\n"
            f"Correct option: ({request['gold_letter']}) {gold}")
    return {"messages": [{"role": "system", "content": REWRITE_SYSTEM}, {"role": "user", "content": user}],
            "max_tokens": options["max_tokens"], "temperature": options["temperature"]}


def judge_payload(request: dict, rewrite: Rewrite, options: dict) -> dict:
    gold = next((o["text"] for o in request["original_options"] if o["letter"] == request["gold_letter"]), "")
    user = (f"Original question:\n{request['question']}\n\nOptions:\n{_options_listing(request)}\n\n"
            f"Correct option: ({request['gold_letter']}) {gold}\n\nRewritten question:\n{rewrite.question}\n\n"
            f"Stated final answer: {rewrite.answer}")
    # The judge decides; sampling would make the same item pass on one run and fail on the next.
    return {"messages": [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}],
            "max_tokens": min(options["max_tokens"], 256), "temperature": 0.0}


def parse_rewrite(text: str) -> Rewrite | str:
    """A Rewrite, 'N/A' when the model declined, or 'parse: …' with the reason."""
    text = re.sub(r"<think>.*?</think>", "", text or "", flags=re.DOTALL | re.IGNORECASE)
    text = FENCE.sub("", text.strip())
    if not text:
        return "parse: empty reply"
    if NA.match(text) or (NA.match(text.splitlines()[0]) and not QUESTION_BLOCK.search(text)):
        return "N/A"
    questions, answers = QUESTION_BLOCK.findall(text), ANSWER_BLOCK.findall(text)
    if not questions or not answers:
        for obj in json_objects(text):
            if isinstance(obj.get("question"), str) and isinstance(obj.get("answer"), (str, int, float)):
                questions, answers = [obj["question"]], [str(obj["answer"])]
                break
    if not questions:
        return f"parse: no <question> in {_snippet(text)}"
    if not answers:
        return f"parse: no <answer> in {_snippet(text)}"
    question, answer = questions[-1].strip(), answers[-1].strip()
    if NA.match(question):
        return "N/A"
    if not question or not answer:
        return "parse: empty question or answer"
    return Rewrite(question, answer)


def parse_verdict(text: str) -> tuple[bool, str]:
    """(passed, reason); raises LLMWriterError when the verdict cannot be read or contradicts itself."""
    text = re.sub(r"<think>.*?</think>", "", text or "", flags=re.DOTALL | re.IGNORECASE).strip()
    text = FENCE.sub("", text)
    for obj in json_objects(text):
        verdict = str(obj.get("verdict", "")).strip().upper()
        if verdict in ("PASS", "FAIL"):
            return verdict == "PASS", str(obj.get("reason") or "")[:200]
    found = {m.upper() for m in VERDICT_LINE.findall(text)}
    if not found and (m := BARE_VERDICT.match(text)):
        found = {m.group(1).upper()}
    if len(found) == 1:
        return found.pop() == "PASS", text[:200]
    if found:
        raise LLMWriterError(f"contradictory verdicts in {_snippet(text)}")
    raise LLMWriterError(f"no verdict in {_snippet(text)}")


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    return repr(flat[:80] + ("…" if len(flat) > 80 else ""))


def review_reformulation(row: dict, result: dict, stem_check: Callable[[str], str | None]) -> Rewrite | str:
    """The accepted rewrite, or the rejection reason (codes reformulate_request, reformulate_na,
    reformulate_parse, reformulate_answer_changed, reformulate_depends_on_options, reformulate_judge).
    stem_check: the builder's rules for a stem that cannot stand alone (reason or None), passed in by the builder so
    that this module does not import it. The stated answer is held to the row's by the rewards' bounded checker, with
    the comparison the builder uses between options (`MathEquivalence.same`)."""
    rewrite_answer = result.get("rewrite") or {}
    if "error" in rewrite_answer:
        return f"reformulate_request: {rewrite_answer['error']}"
    if rewrite_answer.get("finish_reason") == "length":
        return "reformulate_parse: the rewrite hit the token limit"
    rewrite = parse_rewrite(rewrite_answer.get("text", ""))
    if rewrite == "N/A":
        return "reformulate_na: the model found the question not convertible"
    if isinstance(rewrite, str):
        return f"reformulate_{rewrite}"
    if reason := stem_check(rewrite.question):
        return f"reformulate_depends_on_options: {reason}"
    same = shared_checker().same(row["answer"], rewrite.answer)
    if same is None:
        return "reformulate_answer_changed: math-verify timed out comparing the answers"
    if not same:
        return f"reformulate_answer_changed: stated {rewrite.answer[:40]!r}, gold {row['answer'][:40]!r}"
    judge = result.get("judge") or {}
    if "error" in judge:
        return f"reformulate_request: judge: {judge['error']}"
    try:
        passed, reason = parse_verdict(judge.get("text", ""))
    except LLMWriterError as error:
        return f"reformulate_judge: unreadable verdict: {error}"
    if not passed:
        return f"reformulate_judge: FAIL: {reason}"
    return rewrite


def reformulate_rows(rows: list[dict], options: LLMOptions, workdir: str | Path, stem_check: Callable[[str], str | None],
                     progress: bool = True, overwrite: bool = False) -> list[Rewrite | str]:
    """For each converted MCQA row (question, answer, original_options, gold_letter), in order: the
    accepted rewrite or the reason it was refused (stem_check: as in `review_reformulation`; WORKDIR: as in
    run_generation)."""
    sampling = {"max_tokens": options.max_tokens, "temperature": options.temperature}
    requests = {
        f"{i:07d}": {"question": row["question"], "original_options": row["original_options"],
                     "gold_letter": row["gold_letter"], "options": sampling}
        for i, row in enumerate(rows)
    }
    results = run_generation(requests, reformulate_rollout, options, workdir, "reformulate", progress, overwrite)
    return [
        review_reformulation(row, results[key], stem_check) if key in results else "reformulate_request: refused by the server as a bad request"
        for key, row in zip(requests, rows)
    ]
