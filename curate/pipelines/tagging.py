"""The tag jobs. `curate tag` and the tag flow run the tag job: a cheap classifier tags through
curate.pipelines.tag.tag_job, an LLM one (llm, cascade) through `run_llm_tagging` on the job's model server, as
`curate tag-llm` (the tag-llm job, with every LLM tagging option) would run it. `curate tag` imports this module
only for an LLM classifier: importing it loads datatrove's inference runner, most of a second of start-up."""

from __future__ import annotations

import dataclasses
import json

from curate.classifiers import needs_model_server, resolve_name
from curate.options import TAG_REQUEST_TIMEOUT
from curate.pipelines.jobs import TagJob, TagLLMJob
from curate.pipelines.llm.tag_options import LLMTagOptions
from curate.pipelines.llm_tag import LLMTagResult, run_llm_tagging
from curate.pipelines.tag import TagJobError, TagResult, check_no_model, tag_job


def llm_options(job: TagJob) -> LLMTagOptions | None:
    """The LLM tagging options of a job whose classifier is an LLM (None for a cheap one): its server with `model`
    and tag-llm's request timeout (vLLM parallelism follows --gpus-per-task: tag offers no --tp). An unknown classifier,
    an LLM one without a model or a model for a cheap one fails here, before anything is tagged (the tag flow checks its
    parameters so)."""
    if not needs_model_server(job.classifier):
        check_no_model(job)
        return None
    if not job.model:
        raise TagJobError(f"--classifier {job.classifier} needs --model M (and --backend vllm|endpoint|transformers)")
    name = resolve_name(job.classifier)[0]
    gate = job.gate or ("cues" if name.startswith("cascade_") else None)
    server = {**dataclasses.asdict(job.server), "model": job.model, "request_timeout": TAG_REQUEST_TIMEOUT}
    return LLMTagOptions(**server, mode=job.mode, structured=job.structured, max_doc_tokens=job.max_doc_tokens,
                         gate=gate, llm_version=name if name.startswith("llm_") else "llm_v1")


def tag(job: TagJob, progress: bool = True) -> TagResult | LLMTagResult:
    """Runs the tag job: a rerun skips finished tasks. An LLM run returns its request and token counts too."""
    options = llm_options(job)
    if options is not None:
        return run_llm_tagging(job.corpus, job.output, options, tasks=job.executor.tasks,
                               workers=job.executor.workers, limit=job.limit, progress=progress, executor=job.executor)
    return tag_job(job, progress=progress)


def tag_llm(job: TagLLMJob, progress: bool = True) -> LLMTagResult:
    """Runs the tag-llm job: its LLMTagOptions, with --chat-template-kwargs read as the JSON object it must be."""
    options = job.server
    if job.chat_template_kwargs is not None:
        try:
            template_kwargs = json.loads(job.chat_template_kwargs)
        except json.JSONDecodeError as error:
            raise TagJobError(f"--chat-template-kwargs is not JSON ({error}); pass an object, e.g. "
                              "'{\"enable_thinking\": false}'") from None
        if not isinstance(template_kwargs, dict):
            raise TagJobError("--chat-template-kwargs must be a JSON object, e.g. '{\"enable_thinking\": false}'")
        options = dataclasses.replace(options, chat_template_kwargs=template_kwargs)
    return run_llm_tagging(job.corpus, job.output, options, tasks=job.executor.tasks, workers=job.executor.workers,
                           limit=job.limit, progress=progress, executor=job.executor)
