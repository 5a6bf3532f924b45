"""How `curate tag-llm` prompts a model: the server options (ServerOptions) plus the tagging prompt's settings.

Apart from curate.pipelines.llm_tag (the tagging job) so that the tag job configs (curate.pipelines.jobs), which the
tagging job imports, can name this class without an import cycle."""

from __future__ import annotations

from dataclasses import dataclass

from curate.classifiers import get_classifier
from curate.classifiers.cascade import CascadeClassifier
from curate.classifiers.llm import default_chat_template_kwargs
from curate.options import DEFAULT_MAX_DOC_TOKENS, DEFAULT_RECORDS_PER_CHUNK, TAG_REQUEST_TIMEOUT
from curate.pipelines.llm.options import ServerConfigError, ServerOptions


@dataclass(frozen=True)
class LLMTagOptions(ServerOptions):
    """The server (ServerOptions) plus how tagging prompts it and writes its rows."""

    request_timeout: float = TAG_REQUEST_TIMEOUT
    mode: str = "per-behavior"
    structured: bool = False
    max_doc_tokens: int = DEFAULT_MAX_DOC_TOKENS
    tokenizer: str | None = None
    max_answer_tokens: int | None = None
    records_per_chunk: int = DEFAULT_RECORDS_PER_CHUNK
    gate: str | None = None  # set: cascade_v1 with this gate classifier
    # The LLM classifier version that prompts and reads the answers: llm_v1 (counts) or llm_spans_v1 (quotes).
    llm_version: str = "llm_v1"

    def template_kwargs(self) -> dict:
        if self.chat_template_kwargs is not None:
            return dict(self.chat_template_kwargs)
        return default_chat_template_kwargs(self.tokenizer or self.model)

    def classifier(self):
        llm_options = {"mode": self.mode, "structured": self.structured, "max_doc_tokens": self.max_doc_tokens,
                       "tokenizer": self.tokenizer, "max_answer_tokens": self.max_answer_tokens,
                       "chat_template_kwargs": self.template_kwargs()}
        if self.gate:
            if self.llm_version != "llm_v1":
                raise ServerConfigError(f"a gate (cascade_v1) runs in front of llm_v1 only, not {self.llm_version}")
            return CascadeClassifier(self.model, gate=self.gate, **llm_options)
        return get_classifier(self.llm_version, model=self.model, **llm_options)
