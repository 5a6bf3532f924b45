"""Which model, on which server, started how: the server options every job that calls a model shares (tagging, CPT
rewrite, pass-rate sampling, the LLM writers, the judges), validated the same way for all of them.

Apart from curate.pipelines.llm.server (their translation into datatrove's InferenceConfig, and the runner) because
that module imports datatrove's inference runner, most of a second: the command line builds and checks these options
for every command that offers a model server, `curate tag` with cues among them, before it knows a server is needed.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, fields

from curate.errors import CurateError
from curate.options import ServerFields
from curate.pipelines.vllm_serve import VLLMSetupError, check_vllm, executable_path, reasoning_flags

BACKENDS = ("vllm", "endpoint", "transformers")
DEFAULT_CONCURRENCY = {"vllm": 256, "endpoint": 32, "transformers": 4}
# One start attempt: spawning the server (on a retry, waiting for another task's first start) and then until it
# answers. A real model's first vLLM start (weights from a network disk, torch.compile, CUDA graphs) takes minutes.
DEFAULT_START_TIMEOUT = {"vllm": 1800.0, "endpoint": 300.0, "transformers": 600.0}
DEFAULT_START_RETRIES = {"vllm": 2, "endpoint": 1, "transformers": 1}


class ServerConfigError(CurateError, ValueError):
    pass


@dataclass(frozen=True, kw_only=True)
class ServerOptions(ServerFields):
    """Which model, on which server (ServerFields: the "Model server" options), started how. A job's options extend
    this class with the job's own settings (sampling, prompts, budgets), so that every job validates and configures
    its server the same way."""

    model: str
    request_timeout: float = 600.0
    chat_template_kwargs: dict | None = None  # None: the model family's default (Qwen3: thinking off), else {}
    reasoning_parser: str | None = None  # vllm only: the server splits <think> off into `reasoning`
    max_model_len: int | None = None  # the server's context; None: what one request of the job needs

    @property
    def server(self) -> ServerOptions:
        """The server part alone (a job's options are ServerOptions plus their own settings)."""
        return ServerOptions(**{f.name: getattr(self, f.name) for f in fields(ServerOptions)})

    def tensor_parallel(self, gpus_per_task: int = 0) -> int:
        if self.tp is not None:
            return self.tp
        return max(1, gpus_per_task // self.dp) if self.backend == "vllm" and gpus_per_task else 1

    def validate(self, gpus_per_task: int = 0) -> None:
        if not self.model:
            raise ServerConfigError("--model is required (a hub name or a local directory)")
        if self.backend not in BACKENDS:
            raise ServerConfigError(f"unknown backend {self.backend!r}; choose one of {', '.join(BACKENDS)}")
        if self.backend == "endpoint" and not self.endpoint_url:
            raise ServerConfigError("--backend endpoint needs --endpoint-url (an OpenAI-compatible base URL ending in /v1)")
        if self.backend != "endpoint" and self.endpoint_url:
            raise ServerConfigError("--endpoint-url only applies to --backend endpoint")
        if self.backend == "transformers" and shutil.which("transformers", path=executable_path()) is None:
            raise ServerConfigError("--backend transformers needs `transformers serve`: pip install 'curate[serve]'")
        if self.backend == "endpoint" and gpus_per_task:
            raise ServerConfigError("--gpus-per-task applies to servers this job starts (vllm, transformers); "
                                    "an endpoint's GPUs are its own")
        parallel = self.tensor_parallel(gpus_per_task) * self.dp
        if self.backend == "vllm" and gpus_per_task and parallel != gpus_per_task:
            raise ServerConfigError(
                f"--tp {self.tensor_parallel(gpus_per_task)} x --dp {self.dp} = {parallel} GPUs per server, but each task "
                f"gets --gpus-per-task {gpus_per_task}; make them equal (--tp defaults to --gpus-per-task)"
            )
        if self.reasoning_parser and self.backend != "vllm":
            raise ServerConfigError("--reasoning-parser is a flag of `vllm serve`; it applies to --backend vllm only")
        if self.backend == "vllm":
            try:
                _, version = check_vllm()
                if self.reasoning_parser:
                    reasoning_flags(self.reasoning_parser, version)
            except VLLMSetupError as error:
                raise ServerConfigError(str(error)) from None
