"""On-policy verifier audit: the reward's precision and recall on the responses of the policy that will be trained.

A reward accurate on another model's outputs can be inaccurate on the target policy's: its answer format, its
length, its habit of restating intermediate answers are the policy's own. So the policy is sampled k times per
problem through the pass-rate filter's sampling (datatrove's InferenceRunner, the `curate tag-llm` backends),
every response is labeled by a reference judge, and the labeled responses go through the stratified audit of
`curate.handoff.behavior_audit` (same figures, same `--report` layout).

Reference judges:
- `strict` (always): the response's last `\\boxed{}` (the format the prompt asks for; a response without one is
  incorrect) against the gold, parsed and compared by math-verify's own strict `verify`, with none of curate's
  normalization, under curate's time bound (`MathEquivalence.strict`: math-verify's SIGALRM timeouts cannot run
  outside the main thread). None (timeout, gold math-verify cannot parse) leaves the response out, with the reason.
- `llm` (with a judge model): the versioned prompt in prompts/judge_v1 (response first, then problem and reference
  answer), answered as `{"correct": true|false}`, parsed by `parse_judge_verdict` (JSON or a bare verdict line;
  anything else is an error with its reason, never a guess), run through the same LLM job runner.
`label` picks the reference: strict, llm, or agree (only the responses both judges label the same way; the others
are left out and counted).

Output layout (a rerun with the same settings reuses every file, nothing is sampled or judged twice; other
sampling or judge settings are refused with the fix, and `overwrite` samples and judges again):
    OUT/problems/data/train-00000.parquet  the problems of a jsonl/parquet file as RL rows (a built dataset is read
                                           in place)
    OUT/rates/, OUT/.curate/               the sampling's own shards, checkpoints, logs and configuration
    OUT/responses.jsonl                    one line per response: id, key, sample, question, gold, text, finish_reason
    OUT/judges/strict-v1.jsonl             the strict judge's answer and verdict per response
    OUT/judges/<prompt version>.jsonl      the LLM judge's verdict, reason and (the end of) its output per response
    OUT/report.json, OUT/report.png        unless --report/--plot say otherwise
Every file is written whole (NAME.partial, then renamed).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from datatrove.data import Document, DocumentsPipeline
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.inference.types import InferenceError
from datatrove.pipeline.writers.jsonl import JsonlWriter

from curate.classifiers.llm import DocumentPrompt, flat_json_objects_last_first, read_flag, read_prompt_files
from curate.errors import CurateError
from curate.files import atomic_path, write_text_atomic
from curate.handoff.behavior_audit import run_stratified_audit
from curate.handoff.export import Exporter, ExportError, RowRejected, input_files
from curate.handoff.passrate import row_key, run_sampling
from curate.handoff.sampling import SamplingOptions
from curate.handoff.verifier_audit import Pair, answer_type, json_lines
from curate.pipelines.llm.job import LLMJobFolder, claim_job, run_llm_job
from curate.pipelines.llm.options import ServerOptions
from curate.pipelines.steps import AtomicOutput
from curate.rewards import get_reward
from curate.rewards.equivalence import shared_checker
from curate.rewards.extract import DEFAULT, boxed_contents
from curate.rewards.registry import final_gold

JUDGE_PROMPTS = Path(__file__).parent / "prompts" / "judge_v1"
STRICT_VERSION = "strict-v1"
LABELS = ("strict", "llm", "agree")
JUDGE_KEY = "curate_judge"


class OnPolicyAuditError(CurateError, ValueError):
    pass


# --------------------------------------------------------------------------------------------- #
# Problems
# --------------------------------------------------------------------------------------------- #
@dataclass(frozen=True)
class ProblemColumns:
    question: str = "question"
    answer: str = "answer"
    id: str | None = None


def _read_records(path: Path) -> list[dict]:
    if path.suffix == ".parquet":
        return pq.read_table(path).to_pylist()
    records = []
    for number, _, record in json_lines(path):
        if isinstance(record, json.JSONDecodeError):
            raise OnPolicyAuditError(f"{path}:{number} is not JSON ({record})")
        if isinstance(record, dict):
            records.append(record)
    return records


def prepare_problems(problems: str | Path, output: Path, columns: ProblemColumns = ProblemColumns(),
                     data_source: str = "curate/math") -> Path:
    """The dataset to sample: a built dataset (a folder with data/*.parquet and RL columns: question, data_source,
    answer or ground_truth) as it is; a jsonl or parquet file is written as RL rows (question, answer, data_source,
    id) under OUT/problems, the question and answer read from the columns named."""
    problems = Path(problems)
    if problems.is_dir():
        return problems
    if not problems.is_file():
        raise OnPolicyAuditError(f"--problems {problems} does not exist (give a built dataset folder, or a jsonl or "
                                 "parquet file with question and answer columns)")
    records = _read_records(problems)
    rows = []
    for number, record in enumerate(records):
        question, answer = record.get(columns.question), record.get(columns.answer)
        if question is None or answer is None:
            continue
        row_id = record.get(columns.id) if columns.id else record.get("id")
        rows.append({"id": str(row_id if row_id is not None else f"{problems.name}/{number}"), "question": str(question),
                     "answer": answer if isinstance(answer, str) else json.dumps(answer), "data_source": data_source,
                     "ability": "math"})
    if not rows:
        found = sorted({k for r in records[:50] for k in r})
        raise OnPolicyAuditError(f"no row of {problems} has both {columns.question!r} and {columns.answer!r}; its "
                                 f"columns: {', '.join(found) or 'none'} (name them with --question-key/--answer-key)")
    dataset = output / "problems"
    path = dataset / "data" / "train-00000.parquet"
    with atomic_path(path) as partial:
        pq.write_table(pa.Table.from_pylist(rows), partial)
    return dataset


def read_problems(dataset: Path, options: SamplingOptions) -> dict[str, dict]:
    """Row key (as the sampler names rows) -> the row's id, question and ground truth, converted as the sampler
    converts them (so a row the sampler rejected is absent here too)."""
    out = {}
    for number, (split, path) in enumerate(input_files(Path(dataset))):
        source = pq.ParquetFile(path)
        exporter = Exporter("trl", source.schema_arrow, options.instruction, options.system)
        position = 0
        for batch in source.iter_batches(batch_size=1024):
            for row in batch.to_pylist():
                key = row_key(number, position)
                position += 1
                try:
                    prompt = exporter.convert(row, split, position - 1)
                except RowRejected:
                    continue
                out[key] = {"row_id": prompt["id"], "question": row.get("question"), "data_source": prompt["data_source"],
                            "gold": json.loads(json.dumps(prompt["solution"], default=str))}
    return out


# --------------------------------------------------------------------------------------------- #
# Files written whole
# --------------------------------------------------------------------------------------------- #
def _write_jsonl(path: Path, records) -> Path:
    with atomic_path(path) as partial, open(partial, "w", encoding="utf-8") as out:
        out.writelines(json.dumps(record, ensure_ascii=False, default=str) + "\n" for record in records)
    return path


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _write_json(path: Path, value) -> None:
    write_text_atomic(path, json.dumps(value, indent=2, default=str))


# --------------------------------------------------------------------------------------------- #
# Sampling
# --------------------------------------------------------------------------------------------- #
def sample_responses(dataset: Path, output: Path, options: SamplingOptions, limit: int = -1,
                     progress: bool = True, overwrite: bool = False) -> tuple[list[dict], bool]:
    """Every response of the policy, one record per sample (OUT/responses.jsonl); (records, whether reused).
    A rerun with the same dataset and sampling options reads the file and starts no server; other options are
    refused by the sampling's job (run_sampling), unless `overwrite`, which samples again."""
    record_path, config_path = output / "responses.jsonl", output / ".curate" / "responses.json"
    config = {"dataset": str(Path(dataset).resolve()), "limit": limit, **options.fingerprint()}
    if not overwrite and record_path.is_file() and config_path.is_file() and json.loads(config_path.read_text()) == config:
        return _read_jsonl(record_path), True
    try:
        sampling = run_sampling(dataset, output, options, limit=limit, progress=progress, overwrite=overwrite)
    except ExportError as error:
        raise OnPolicyAuditError(str(error)) from None
    problems = read_problems(dataset, options)
    records = []
    for path in sorted(sampling.rates_dir.glob("rates_*.parquet")):
        for prompt in pq.read_table(path).to_pylist():
            problem = problems[prompt["key"]]
            for index, sample in enumerate(prompt["samples"]):
                records.append({"id": f"{prompt['key']}#{index}", "key": prompt["key"], "row_id": prompt["id"],
                                "sample": index, "data_source": prompt["data_source"], "question": problem["question"],
                                "gold": problem["gold"], "text": sample["text"], "finish_reason": sample["finish_reason"],
                                "error": sample["error"] if sample["finish_reason"] == "error" else None})
    records.sort(key=lambda r: (tuple(int(x) for x in r["key"].split(":")), r["sample"]))
    _write_jsonl(record_path, records)
    _write_json(config_path, config)
    return records, False


# --------------------------------------------------------------------------------------------- #
# Judges
# --------------------------------------------------------------------------------------------- #
def strict_verdict(text: str | None, gold, checker=None) -> dict:
    """{answer, verdict, reason}: the last `\\boxed{}` of the response against the gold (MathEquivalence.strict)."""

    gold_text = final_gold(gold)
    if not gold_text or not gold_text.strip():
        return {"answer": None, "verdict": None, "reason": "no gold answer"}
    boxes = boxed_contents(text or "")
    if not boxes:
        return {"answer": None, "verdict": False, "reason": "no \\boxed{} answer"}
    verdict = (checker or shared_checker()).strict(gold_text, boxes[-1])
    reason = None if verdict is not None else "math-verify could not decide (timeout, or a gold it cannot parse)"
    return {"answer": boxes[-1], "verdict": verdict, "reason": reason}


def strict_judge(records: list[dict], output: Path, threads: int = 4, progress: bool = True,
                 overwrite: bool = False) -> list[dict]:
    """The strict judge's verdict on every response (OUT/judges/strict-v1.jsonl, reused when it covers them, unless
    `overwrite`: the responses were sampled again under the same ids)."""
    from concurrent.futures import ThreadPoolExecutor

    from rich.progress import Progress


    path = output / "judges" / f"{STRICT_VERSION}.jsonl"
    ids = [r["id"] for r in records]
    if path.is_file() and not overwrite:
        existing = _read_jsonl(path)
        if [v["id"] for v in existing] == ids:
            return existing
    checker = shared_checker()
    checker.warm(threads)
    judged = [r for r in records if r["error"] is None]

    def judge(record):
        return {"id": record["id"], **strict_verdict(record["text"], record["gold"], checker)}

    with ThreadPoolExecutor(threads) as pool, Progress(disable=not progress, transient=True) as bar:
        task = bar.add_task("strict judge", total=len(judged))
        by_id = {}
        for verdict in pool.map(judge, judged):
            by_id[verdict["id"]] = verdict
            bar.advance(task)
    verdicts = [by_id.get(r["id"]) or {"id": r["id"], "answer": None, "verdict": None, "reason": "request error"}
                for r in records]
    _write_jsonl(path, verdicts)
    return verdicts


class JudgePrompt(DocumentPrompt):
    @classmethod
    def load(cls, directory: Path = JUDGE_PROMPTS) -> JudgePrompt:
        texts, version = read_prompt_files(directory)
        missing = [name for name in ("system", "document", "question") if name not in texts]
        if missing or "{gold}" not in texts["question"]:
            raise OnPolicyAuditError(f"{directory} needs system.txt, document.txt ({{document}}) and question.txt "
                                     f"({{problem}}, {{gold}}); missing: {', '.join(missing) or '{gold}'}")
        return cls.from_texts(texts, version)

    def messages(self, response: str, problem: str, gold: str) -> list[dict]:
        # The response first, problem and reference after.
        return self.render(response, problem=problem or "", gold=gold or "")


_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.IGNORECASE | re.DOTALL)
_BARE = re.compile(r"^\W*(?:(?:verdict|answer|grade|judgement|judgment)\W+)?(correct|incorrect|true|false|yes|no)\W*$",
                   re.IGNORECASE)
_TRUE = {"true", "yes", "correct", "1"}
_FALSE = {"false", "no", "incorrect", "0"}


def parse_judge_verdict(output: str | None) -> tuple[bool | None, str | None]:
    """(verdict, error). The last JSON object with a readable `correct` (think blocks and prose around it ignored),
    else a last line that is only a verdict word ("Verdict: incorrect"); anything else is an error. JSON is read
    with json.loads, nothing is evaluated."""
    if not output or not output.strip():
        return None, "empty output"
    text = _THINK.sub("", output)
    for answer in flat_json_objects_last_first(text):
        if (verdict := read_flag(answer.get("correct"), _TRUE, _FALSE)) is not None:
            return verdict, None
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if lines and (match := _BARE.match(lines[-1].strip())):
        return match.group(1).lower() in _TRUE, None
    return None, "no verdict: neither a JSON object with 'correct' nor a last line with only the verdict"


class JudgeReader(PipelineStep):
    """Responses (OUT/responses.jsonl) → Documents carrying the judge's chat messages; empty responses and request
    errors are not sent (they are judged without the model)."""

    name = "🧑‍⚖️ Judge requests"
    type = "📖 - READER"

    def __init__(self, responses: str, prompt: JudgePrompt):
        super().__init__()
        self.responses, self.prompt = responses, prompt

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        for number, record in enumerate(_read_jsonl(Path(self.responses))):
            if number % world_size != rank or record["error"] is not None or not (record["text"] or "").strip():
                continue
            self.stat_update("requests")
            yield Document(text=record["text"], id=record["id"], metadata={
                "messages": self.prompt.messages(record["text"], record["question"] or "", final_gold(record["gold"]) or "")})


async def judge_rollout(document: Document, generate) -> dict:
    """One judge request; never None (a failed request is a verdict None with its error)."""
    try:
        result = await generate({"messages": document.metadata["messages"]})
    except InferenceError as error:
        return {"verdict": None, "error": f"request: {str(error.error)[:300]}", "output": None}
    verdict, error = parse_judge_verdict(result.text)
    return {"verdict": verdict, "error": error, "output": (result.text or "")[-2000:]}


class JudgeWriter(AtomicOutput, JsonlWriter):
    name = "📒 Judge verdicts"

    def __init__(self, output_folder: str):
        super().__init__(output_folder, output_filename="judge_${rank}_${chunk_index}.jsonl", compression=None,
                         adapter=self._row)

    def _row(self, _writer, document: Document) -> dict:
        return {"id": document.id, **document.metadata[JUDGE_KEY][0]}


def judge_options(policy: SamplingOptions, judge: ServerOptions, max_tokens: int = 512) -> SamplingOptions:
    """The judge's sampling: its own server (`judge`, see curate.cli.groups.judge_server), greedy, one answer per
    response, a prompt that holds a whole response of the policy."""
    return SamplingOptions(**{f.name: getattr(judge, f.name) for f in dataclasses.fields(ServerOptions)}, k=1,
                           temperature=0.0, top_p=1.0, max_tokens=max_tokens,
                           max_prompt_tokens=policy.max_prompt_tokens + policy.max_tokens,
                           records_per_chunk=policy.records_per_chunk)


def _responses_digest(records: list[dict]) -> str:
    """What the judge was asked: every response's id and text (a resampled run keeps the ids, not the texts)."""
    digest = hashlib.sha256()
    for record in records:
        digest.update(json.dumps([record["id"], record["text"], record["error"]], ensure_ascii=False).encode())
    return digest.hexdigest()


def llm_judge(records: list[dict], output: Path, options: SamplingOptions, prompt: JudgePrompt | None = None,
              progress: bool = True, overwrite: bool = False) -> tuple[list[dict], str]:
    """The LLM judge's verdict on every response (OUT/judges/<version>-<model digest>.jsonl); returns (verdicts, the
    judge's name: prompt version and model). Its job (curate.pipelines.llm.job) records what it judged and how: the
    same configuration resumes (a finished run is read back, starting no server), another one is refused with the
    fix, and `overwrite` judges again."""
    prompt = prompt or JudgePrompt.load()
    digest = hashlib.sha256(options.model.encode()).hexdigest()[:8]
    name = f"{prompt.version}-{digest}"
    path = output / "judges" / f"{name}.jsonl"
    work = (output / ".curate" / "judge" / name).resolve()
    config = {"prompt_version": prompt.version, "model": options.model, "max_tokens": options.max_tokens,
              "temperature": options.temperature, "responses": _responses_digest(records), "count": len(records)}
    folder = LLMJobFolder(work, hidden=False)
    claim_job(work / "judge.json", config, "LLM judge verdicts", "pass --overwrite to judge again",
              overwrite=overwrite, run=[work / "verdicts", folder.checkpoints, folder.logs, path,
                                        path.with_suffix(".json")])
    if path.is_file():
        existing = _read_jsonl(path)
        if [v["id"] for v in existing] == [r["id"] for r in records]:
            return existing, name
    options.validate()  # only now: reading a finished judge back needs no server
    reader = JudgeReader(str((output / "responses.jsonl").resolve()), prompt)
    run_llm_job(folder, [reader], rollout_fn=judge_rollout, config=options.inference_config(folder.server_logs),
                writer=JudgeWriter(str(work / "verdicts")), records_per_chunk=options.records_per_chunk,
                metadata_key=JUDGE_KEY, job_name="curate-judge", what="LLM judge")
    answered = {v["id"]: v for f in sorted((work / "verdicts").glob("judge_*.jsonl")) for v in _read_jsonl(f)}
    verdicts = []
    for record in records:
        if record["error"] is not None:
            verdicts.append({"id": record["id"], "verdict": None, "error": "request error (policy)", "output": None})
        elif not (record["text"] or "").strip():
            verdicts.append({"id": record["id"], "verdict": False, "error": None, "output": None})
        else:
            verdicts.append(answered.get(record["id"]) or {"id": record["id"], "verdict": None,
                                                            "error": "no judge answer", "output": None})
    _write_jsonl(path, verdicts)
    _write_json(path.with_suffix(".json"), {"prompt_version": prompt.version, "model": options.model,
                                            "max_tokens": options.max_tokens, "backend": options.backend})
    return verdicts, name


# --------------------------------------------------------------------------------------------- #
# Labeled pairs
# --------------------------------------------------------------------------------------------- #
@dataclass
class OnPolicyPairs:
    pairs: list[Pair]
    rejects: list[dict]
    records: list[dict]
    reference: dict
    reused_samples: bool = False
    judge: str | None = None
    counts: Counter = field(default_factory=Counter)


def _judge_summary(verdicts: list[dict]) -> dict:
    values = [v["verdict"] for v in verdicts]
    return {"correct": sum(v is True for v in values), "incorrect": sum(v is False for v in values),
            "undecided": sum(v is None for v in values)}


def labeled_pairs(records: list[dict], strict: list[dict], judged: list[dict] | None, label: str) -> OnPolicyPairs:
    """Responses with their reference label as audit pairs; the others as rejects with the reason."""
    if label not in LABELS:
        raise OnPolicyAuditError(f"--label must be one of {', '.join(LABELS)}, got {label!r}")
    if label != "strict" and judged is None:
        raise OnPolicyAuditError(f"--label {label} needs an LLM judge: give --judge-model")
    pairs, rejects = [], []
    agree = disagree = 0
    for index, record in enumerate(records):
        s = strict[index]["verdict"]
        j = judged[index]["verdict"] if judged is not None else None
        if judged is not None and s is not None and j is not None:
            agree += s == j
            disagree += s != j
        reason = None
        if record["error"] is not None:
            reason = f"request error: {record['error']}"
        elif label == "strict":
            value, reason = s, None if s is not None else f"strict judge: {strict[index]['reason']}"
        elif label == "llm":
            value, reason = j, None if j is not None else f"LLM judge: {judged[index]['error']}"
        else:
            value = s if s is not None and s == j else None
            if s is None or j is None:
                reason = "a judge could not decide"
            elif s != j:
                reason = "the judges disagree"
        if reason:
            rejects.append({"id": record["id"], "reason": reason, "strict": s, "llm": j})
            continue
        gold_text = final_gold(record["gold"]) or ""
        pairs.append(Pair(record["id"], record["gold"], record["text"] or "", bool(value), answer_type(gold_text),
                          extraction=DEFAULT, group=record["key"]))
    reference = {"label": label, "strict": {"version": STRICT_VERSION, **_judge_summary(strict)}}
    if judged is not None:
        reference["llm"] = _judge_summary(judged)
        reference["agreement"] = {"both_decided": agree + disagree, "agree": agree, "disagree": disagree,
                                  "rate": agree / (agree + disagree) if agree + disagree else None}
    return OnPolicyPairs(pairs, rejects, records, reference)


@dataclass
class OnPolicyAudit:
    output: Path
    labeled: OnPolicyPairs
    report: dict
    results: dict
    problems: int
    k: int


def run_onpolicy_audit(problems: str | Path, output: str | Path, options: SamplingOptions,
                       rewards: list[str] | None = None, classifier: str | None = "cues", limit: int = -1,
                       columns: ProblemColumns = ProblemColumns(), data_source: str = "curate/math",
                       judge: SamplingOptions | None = None, label: str = "strict", resamples: int = 2000,
                       seed: int = 0, threads: int = 4, progress: bool = True, overwrite: bool = False) -> OnPolicyAudit:
    """Samples the policy (or reuses its samples), labels every response, audits every reward on them. A rerun with
    other sampling or judge settings is refused with the fix; `overwrite` samples and judges again."""

    output = Path(output)
    names = list(dict.fromkeys(get_reward(r).data_source for r in rewards or ["math"]))  # unknown: fails now
    if label != "strict" and judge is None:
        raise OnPolicyAuditError(f"--label {label} needs an LLM judge: give --judge-model")
    if label not in LABELS:
        raise OnPolicyAuditError(f"--label must be one of {', '.join(LABELS)}, got {label!r}")
    prompt = JudgePrompt.load() if judge is not None else None
    dataset = prepare_problems(problems, output, columns, data_source)
    records, reused = sample_responses(dataset, output, options, limit=limit, progress=progress, overwrite=overwrite)
    if not records:
        raise OnPolicyAuditError(f"no problem of {problems} became a prompt; see {output / 'rejects' / 'prompts'}")
    strict = strict_judge(records, output, threads=threads, progress=progress, overwrite=overwrite)
    judged, judge_name = (llm_judge(records, output, judge, prompt, progress, overwrite=overwrite)
                          if judge is not None else (None, None))
    labeled = labeled_pairs(records, strict, judged, label)
    labeled.reused_samples, labeled.judge = reused, judge_name
    if not labeled.pairs:
        raise OnPolicyAuditError(f"none of the {len(records):,} responses has a reference label "
                                 f"({Counter(r['reason'] for r in labeled.rejects).most_common(3)})")
    n_problems = len({r["key"] for r in records})
    source = {"format": "on-policy", "policy": options.model, "k": options.k, "problems": n_problems,
              "samples": len(records), "sampling": options.fingerprint(),
              "label_source": f"on-policy samples of {options.model}, labeled by the {label} judge"
                              + (f" ({judge_name}, model {judge.model})" if judge is not None and label != "strict" else ""),
              "paths": [str(problems)], "rejected": len(labeled.rejects),
              "rejected_reasons": dict(Counter(r["reason"].split(":")[0] for r in labeled.rejects)),
              "reference": {**labeled.reference, **({"judge": judge_name, "judge_model": judge.model} if judge else {})},
              "responses": str(output / "responses.jsonl")}
    audit = run_stratified_audit(labeled.pairs, names, classifier, resamples, seed, threads, source, progress)
    return OnPolicyAudit(output, labeled, audit.report, audit.results, n_problems, options.k)
