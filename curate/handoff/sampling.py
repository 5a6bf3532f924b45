"""How the policy is sampled (`curate filter-passrate`, the policy and on-policy audits): the policy's server options
(ServerOptions) plus the sampling settings, validated with the pass-rate filter's errors.

Apart from curate.handoff.passrate (the sampling job) so that the handoff job configs (curate.handoff.jobs), which the
export that the sampling job reads imports, can name this class without an import cycle."""

from __future__ import annotations

from dataclasses import dataclass

from curate.errors import CurateError
from curate.options import DEFAULT_RECORDS_PER_CHUNK, SamplingFields
from curate.pipelines.llm.options import ServerConfigError, ServerOptions
from curate.pipelines.llm.server import inference_config

PROMPT_FORMATS = ("chat", "tinyzero")


class PassRateError(CurateError, ValueError):
    pass


@dataclass(frozen=True)
class SamplingOptions(ServerOptions, SamplingFields):
    """The policy's server (ServerOptions, as for `curate tag-llm`) plus how to sample it (SamplingFields: temperature,
    top_p, max_tokens, system)."""

    k: int = 8
    max_prompt_tokens: int = 2048
    instruction: str | None = None  # None: each reward's own answer-format instruction (as in `curate export`)
    records_per_chunk: int = DEFAULT_RECORDS_PER_CHUNK
    # chat: messages through /v1/chat/completions; tinyzero: the raw TinyZero completion prompt through
    # /v1/completions, for base models (the reference study prompted them so)
    prompt_format: str = "chat"

    def validate(self, gpus_per_task: int = 0) -> None:
        if self.prompt_format not in PROMPT_FORMATS:
            raise PassRateError(f"--prompt-format must be one of {', '.join(PROMPT_FORMATS)}, got {self.prompt_format!r}")
        if self.prompt_format == "tinyzero" and self.system:
            raise PassRateError("--system has no place in the TinyZero completion prompt (it has its own preamble)")
        if self.k < 1:
            raise PassRateError("--k must be at least 1")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise PassRateError("--temperature must be ≥ 0 and --top-p in (0, 1]")
        if self.k > 1 and self.temperature == 0:
            raise PassRateError("k > 1 samples at temperature 0 are k copies of one answer; raise --temperature")
        try:
            super().validate(gpus_per_task)
        except ServerConfigError as error:
            raise PassRateError(str(error)) from None

    def inference_config(self, log_folder: str, gpus_per_task: int = 0):
        # One request holds the prompt and the whole answer.
        return inference_config(
            self, log_folder, gpus_per_task, context_tokens=max(1040, self.max_prompt_tokens + self.max_tokens),
            rollouts_per_document=self.k, max_concurrent_documents=None, use_chat=self.prompt_format == "chat",
            default_generation_params={"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens},
        )

    def fingerprint(self) -> dict:
        """What the samples depend on: a rerun with other values must not mix its samples with these."""
        # prompt_format only when not the default: samples written before the option existed still match.
        return {"model": self.model, "k": self.k, "temperature": self.temperature, "top_p": self.top_p,
                "max_tokens": self.max_tokens, "instruction": self.instruction, "system": self.system,
                **({"prompt_format": self.prompt_format} if self.prompt_format != "chat" else {})}
