"""The LLM judge of priming traces (issue 19 part 5): a second reading of the behaviors, by a model.

A model reads each trace with the puzzle's numbers and target (prompts/priming_judge_v1) and counts the four
behaviors; a trace is accepted when it shows exactly the requested ones, the rule the classifier applies. Every
trace the builder wrote is judged, those the classifier kept and those it refused, so the card can say how far
the two readings agree. The judge reports; it does not choose rows.

The requests run as one job through the shared server options (`curate.pipelines.llm.server`: vllm, an endpoint
or `transformers serve`) and the one LLM job rule (`curate.pipelines.llm.job`): a rerun over the same traces with
the same judge resumes from its checkpoints; anything else is refused unless overwrite. Layout, in the dataset:
    judge/verdicts.jsonl   one line per judged trace: id, split, kept (by the classifier), counts, accepted, error
    judge/job.json         the job's configuration; judge/results, judge/_checkpoints, judge/_logs: the job's own
A reply that cannot be read leaves the trace unjudged (accepted null) with `parse: ...`, never counted as 0.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from datatrove.data import Document
from datatrove.pipeline.inference.servers.base import ServerError
from datatrove.pipeline.inference.types import InferenceError
from datatrove.pipeline.writers.jsonl import JsonlWriter

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers.llm import DocumentPrompt, default_chat_template_kwargs, parse_joint
from curate.errors import CurateError
from curate.files import write_text_atomic
from curate.pipelines.llm.job import LLMJobFolder, claim_job, run_llm_job
from curate.pipelines.llm.options import ServerConfigError, ServerOptions
from curate.pipelines.llm.server import inference_config
from curate.pipelines.steps import AtomicOutput

PROMPTS_DIR = Path(__file__).parents[1] / "prompts" / "priming_judge_v1"
JUDGE_DIR = "judge"
VERDICTS = "verdicts.jsonl"
RESULTS_KEY = "curate_priming_judge"
REQUEST_KEY = "curate_request"
# A trace is a few thousand characters at most (--max-dead-ends 3): its tokens, the prompt's and the answer's.
TRACE_TOKENS = 4096


class JudgeError(CurateError, ValueError):
    pass


@dataclass(frozen=True)
class JudgeOptions(ServerOptions):
    """Which model judges and where it runs (ServerOptions), and its answer budget (four counts as JSON)."""

    max_tokens: int = 96

    def validate(self, gpus_per_task: int = 0) -> None:
        if not self.model:
            raise JudgeError("the LLM judge needs a model (--judge-model)")
        if self.max_tokens < 1:
            raise JudgeError("the judge's answer budget must be positive")
        try:
            super().validate(gpus_per_task)
        except ServerConfigError as error:
            raise JudgeError(f"--judge-model: {error}") from None

    def template_kwargs(self) -> dict:
        return (
            dict(self.chat_template_kwargs)
            if self.chat_template_kwargs is not None
            else default_chat_template_kwargs(self.model)
        )

    def context_tokens(self) -> int:
        return TRACE_TOKENS + self.max_tokens


class JudgePrompt(DocumentPrompt):
    @classmethod
    def load(cls, directory: Path = PROMPTS_DIR) -> JudgePrompt:
        return cls.read(directory)

    def messages(self, think: str, numbers: list[int], target: int) -> list[dict]:
        # The numbers and target go in before the trace, so that a trace holding "{target}" stays as written.
        return self.render(think, numbers=", ".join(map(str, numbers)), target=str(target))


@dataclass
class JudgedTrace:
    """One trace to judge: its problem, whether the classifier kept it, and its think text."""

    id: str
    split: str
    kept: bool
    numbers: list[int]
    target: int
    think: str


def verdict(answer: dict, requested: frozenset[str]) -> dict:
    """The judge's reading of one reply: counts, accepted (exactly the requested behaviors; None when unreadable)
    and the error ('request: …' or 'parse: …')."""
    if "error" in answer:
        return {"counts": dict.fromkeys(BEHAVIOR_NAMES), "accepted": None, "error": f"request: {answer['error']}"}
    counts, problems = parse_joint(answer.get("text") or "")
    if answer.get("finish_reason") == "length" and problems:
        problems.append("the reply hit the token limit")
    if problems:
        return {"counts": counts, "accepted": None, "error": "parse: " + "; ".join(problems)}
    accepted = all((counts[b] > 0) == (b in requested) for b in BEHAVIOR_NAMES)
    return {"counts": counts, "accepted": accepted, "error": None}


async def judge_rollout(document: Document, generate) -> dict:
    """One request per trace; a failed request is a verdict with its reason, a dead server fails the task."""
    try:
        result = await generate(dict(document.metadata[REQUEST_KEY]))
    except ServerError:
        raise  # the server is gone: the task fails, and a rerun resumes from the checkpoint
    except Exception as error:  # noqa: BLE001 - any other failed request is this trace's verdict, with its reason
        message = error.error if isinstance(error, InferenceError) else error
        return {"error": f"{type(error).__name__}: {str(message)[:300]}"}
    return {"text": result.text, "finish_reason": result.finish_reason}


class _ResultsWriter(AtomicOutput, JsonlWriter):
    name = "⚖ Judge results"


def judge_traces(
    traces: list[JudgedTrace],
    requested: frozenset[str],
    options: JudgeOptions,
    dataset: Path,
    overwrite: bool = False,
    progress: bool = False,
) -> list[dict]:
    """Judges every trace (one job; see the module docstring for the rerun rule) and writes
    DATASET/judge/verdicts.jsonl; returns the verdict rows in the order of `traces`."""
    options.validate()
    prompt = JudgePrompt.load()
    root = (Path(dataset) / JUDGE_DIR).resolve()
    template = options.template_kwargs()
    requests = {}
    for trace in traces:
        payload = {
            "messages": prompt.messages(trace.think, trace.numbers, trace.target),
            "max_tokens": options.max_tokens,
            "temperature": 0.0,
        }
        if template:
            payload["chat_template_kwargs"] = template
        requests[trace.id] = payload
    if len(requests) != len(traces):
        raise JudgeError("two traces share an id; each problem has one trace, so the build is inconsistent")
    digest = hashlib.sha256(json.dumps(requests, sort_keys=True).encode()).hexdigest()
    folder = LLMJobFolder(root)
    claim_job(
        root / "job.json",
        {
            "model": options.model,
            "prompt_version": prompt.version,
            "max_tokens": options.max_tokens,
            "chat_template_kwargs": template,
            "traces": len(requests),
            "requests_sha256": digest,
        },
        "LLM judge verdicts",
        "pass --overwrite to judge again",
        overwrite=overwrite,
        run=[root / "results", folder.checkpoints, folder.logs, root / VERDICTS],
    )
    documents = [Document(text=t.think, id=t.id, metadata={REQUEST_KEY: requests[t.id]}) for t in traces]
    if documents:
        run_llm_job(
            folder, [documents], rollout_fn=judge_rollout, metadata_key=RESULTS_KEY,
            config=inference_config(options, folder.server_logs, context_tokens=options.context_tokens()),
            writer=_ResultsWriter(str(root / "results"), output_filename="${rank}_${chunk_index}.jsonl",
                                  compression=None),
            job_name="curate-priming-judge", what="LLM judge")
    answers: dict[str, dict] = {}
    for path in sorted((root / "results").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            rollouts = record["metadata"].get(RESULTS_KEY) or []
            if rollouts:
                answers[record["id"]] = rollouts[0]
    rows = []
    for trace in traces:
        # A request the server refused as malformed has no rollout: it is a request failure, not a silent gap.
        answer = answers.get(trace.id, {"error": "refused by the server as a bad request"})
        rows.append(
            {
                "id": trace.id,
                "split": trace.split,
                "kept": trace.kept,
                **verdict(answer, requested),
                "answer": (answer.get("text") or "")[:500],
                "model": options.model,
                "prompt_version": prompt.version,
            }
        )
    write_text_atomic(root / VERDICTS, "".join(json.dumps(row) + "\n" for row in rows))
    return rows


def judge_summary(rows: list[dict]) -> dict:
    """Acceptance under the judge for all judged traces, the kept ones and the refused ones, and its agreement with
    the classifier (over traces the judge could read)."""

    def part(selected):
        judged = [r for r in selected if r["accepted"] is not None]
        return {
            "traces": len(selected),
            "judged": len(judged),
            "accepted": sum(1 for r in judged if r["accepted"]),
            "parse_failures": sum(1 for r in selected if (r["error"] or "").startswith("parse:")),
            "request_failures": sum(1 for r in selected if (r["error"] or "").startswith("request:")),
        }

    judged = [r for r in rows if r["accepted"] is not None]
    return {
        "all": part(rows),
        "kept": part([r for r in rows if r["kept"]]),
        "refused": part([r for r in rows if not r["kept"]]),
        "agreement": {
            "both_accept": sum(1 for r in judged if r["kept"] and r["accepted"]),
            "only_classifier": sum(1 for r in judged if r["kept"] and not r["accepted"]),
            "only_judge": sum(1 for r in judged if not r["kept"] and r["accepted"]),
            "neither": sum(1 for r in judged if not r["kept"] and not r["accepted"]),
        },
    }
