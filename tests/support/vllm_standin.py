"""Test-only stand-in for the EXTERNAL `vllm` executable (vLLM is not installed here, and has no CPU build the
tests could use). It stands in for a binary curate starts, never for curate: curate and datatrove run unchanged
against it, the way they run against a real `vllm serve`.

What it keeps of vLLM, so that a flag or request vLLM would refuse is refused here too:
- the command line: `vllm --version`, and `vllm serve MODEL` with exactly the flags the vLLM versions in FLAGS
  define among those datatrove's VLLMServer and curate pass (datatrove 0.10.1: --port, --max-model-len,
  --trust-remote-code, --disable-uvicorn-access-log, --tensor/data/pipeline-parallel-size=N and KEY=VALUE
  model kwargs; curate: --reasoning-parser, and --enable-reasoning before 0.10) plus the common --server-arg
  flags; anything else exits 2 as argparse does in vLLM;
- a --max-model-len above the model's max_position_embeddings fails the start, as vLLM's config check does;
- a request whose prompt (rendered with the model's own chat template and `chat_template_kwargs`) plus
  `max_tokens` exceeds --max-model-len gets vLLM 0.8-0.22's HTTP 400 and message;
- `response_format` is validated as vLLM's request model does (type text | json_object | json_schema with a
  `json_schema.schema` object); it does not constrain decoding;
- answers come from the model at MODEL (the tests' tiny random model), greedy, up to `max_tokens`;
- "Application startup complete." on stderr when listening (datatrove's VLLMServer watches for it).

It records every start (argv, CUDA_VISIBLE_DEVICES) and every request (prompt tokens, max_tokens, status) as JSON
lines in $CURATE_STANDIN_RECORD. $CURATE_STANDIN_VLLM_VERSION sets the version it reports and whose flags it
parses (default 0.22.1). $CURATE_STANDIN_MAX_NEW_TOKENS caps the tokens it actually generates (the context check
still uses the request's max_tokens; a capped answer ends with finish_reason "length"), because a random model
seldom stops and the tests' CPUs are slow.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Flags per vLLM version, as their `vllm serve` argument parsers define them (vllm/engine/arg_utils.py and
# vllm/entrypoints/openai/cli_args.py), limited to what datatrove and curate pass and the usual --server-arg ones.
COMMON = {
    "--port": int, "--host": str, "--max-model-len": int, "--trust-remote-code": bool,
    "--disable-uvicorn-access-log": bool, "--tensor-parallel-size": int, "--data-parallel-size": int,
    "--pipeline-parallel-size": int, "--gpu-memory-utilization": float, "--max-num-seqs": int, "--dtype": str,
    "--seed": int, "--enforce-eager": bool, "--enable-prefix-caching": bool, "--reasoning-parser": str,
}
SHORT = {"-tp": "--tensor-parallel-size", "-dp": "--data-parallel-size", "-pp": "--pipeline-parallel-size"}
FLAGS = {
    # 0.8.5: --enable-reasoning switches the parser on (and needs --reasoning-parser); no qwen3 parser yet.
    "0.8.5": {**COMMON, "--enable-reasoning": bool},
    # 0.11.0: --enable-reasoning is gone; booleans take --no-X.
    "0.11.0": COMMON,
    # The supported range (pyproject's gpu extra): as 0.11.0 for these flags.
    "0.20.2": COMMON, "0.21.0": COMMON, "0.22.1": COMMON,
}
REASONING_PARSERS = {"0.8.5": {"deepseek_r1", "granite"}}
REASONING_PARSERS_LATER = {"deepseek_r1", "qwen3", "granite", "glm45", "gpt_oss", "mistral", "hunyuan_a13b", "step3"}
NEGATABLE_FROM = (0, 10)  # BooleanOptionalAction (--no-X) for engine booleans


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:3] if part.isdigit())


def parser_for(version: str) -> argparse.ArgumentParser:
    flags = FLAGS[version]
    parser = argparse.ArgumentParser(prog="vllm serve", allow_abbrev=False)
    parser.add_argument("model")
    for flag, kind in flags.items():
        short = [s for s, long in SHORT.items() if long == flag]
        if kind is bool:
            if _version_tuple(version) >= NEGATABLE_FROM and flag not in ("--disable-uvicorn-access-log", "--trust-remote-code"):
                parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=None)
            else:
                parser.add_argument(flag, action="store_true")
        else:
            parser.add_argument(flag, *short, type=kind)
    return parser


def record(entry: dict) -> None:
    path = os.environ.get("CURATE_STANDIN_RECORD")
    if path:
        with open(path, "a") as out:
            out.write(json.dumps(entry) + "\n")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    version = os.environ.get("CURATE_STANDIN_VLLM_VERSION", "0.22.1")
    if argv[:1] == ["--version"]:
        print(version)
        return
    if argv[:1] != ["serve"]:
        print("usage: vllm {serve,--version} ...", file=sys.stderr)
        sys.exit(2)
    record({"event": "start", "argv": ["vllm", *argv], "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "pid": os.getpid()})
    args = parser_for(version).parse_args(argv[1:])  # exits 2 on a flag this version does not define
    parsers = REASONING_PARSERS.get(version, REASONING_PARSERS_LATER)
    if getattr(args, "enable_reasoning", False) and not args.reasoning_parser:
        parser_for(version).error("--enable-reasoning requires --reasoning-parser")
    if args.reasoning_parser and args.reasoning_parser not in parsers:
        parser_for(version).error(f"invalid reasoning parser: {args.reasoning_parser} (chose from {{{','.join(sorted(parsers))}}})")
    serve(args)


def serve(args) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(args.model)
    derived = config.max_position_embeddings
    max_model_len = args.max_model_len or derived
    if max_model_len > derived:
        print(f"ValueError: User-specified max_model_len ({max_model_len}) is greater than the derived max_model_len "
              f"(max_position_embeddings={derived} or model_max_length=None in model's config.json).", file=sys.stderr)
        sys.exit(1)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model).eval()
    lock = threading.Lock()
    model_id = args.model

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a) -> None:
            pass

        def do_GET(self) -> None:
            if self.path.startswith("/v1/models"):
                self._json(200, {"object": "list", "data": [{"id": model_id, "object": "model", "max_model_len": max_model_len}]})
            elif self.path == "/health":
                self._json(200, {})
            else:
                self._json(404, {"detail": "Not Found"})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            if self.path != "/v1/chat/completions":
                return self._json(404, {"detail": "Not Found"})
            status, answer = self._complete(body)
            self._json(status, answer)

        def _complete(self, body: dict):
            max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
            problem = _response_format_problem(body.get("response_format"))
            if problem or not isinstance(body.get("messages"), list) or not isinstance(max_tokens, int) or max_tokens < 1:
                record({"event": "request", "status": 400, "reason": problem or "messages/max_tokens"})
                return 400, _error(problem or "messages must be a list and max_tokens a positive integer")
            kwargs = body.get("chat_template_kwargs") or {}
            encoded = tokenizer.apply_chat_template(body["messages"], add_generation_prompt=True, tokenize=True, **kwargs)
            ids = list(encoded["input_ids"] if hasattr(encoded, "keys") else encoded)
            entry = {"event": "request", "prompt_tokens": len(ids), "max_tokens": max_tokens,
                     "max_model_len": max_model_len, "chat_template_kwargs": kwargs,
                     "response_format": (body.get("response_format") or {}).get("type")}
            if len(ids) + max_tokens > max_model_len:
                record({**entry, "status": 400})
                return 400, _error(
                    f"This model's maximum context length is {max_model_len} tokens. However, you requested "
                    f"{len(ids) + max_tokens} tokens ({len(ids)} in the messages, {max_tokens} in the completion). "
                    "Please reduce the length of the messages or completion.")
            generate = min(max_tokens, int(os.environ.get("CURATE_STANDIN_MAX_NEW_TOKENS") or max_tokens))
            with lock, torch.no_grad():
                output = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                        max_new_tokens=generate, do_sample=False,
                                        pad_token_id=tokenizer.pad_token_id)[0][len(ids):].tolist()
            eos = tokenizer.eos_token_id
            finish = "stop" if eos in output else "length"
            output = output[: output.index(eos)] if eos in output else output
            record({**entry, "status": 200, "completion_tokens": len(output)})
            return 200, {
                "id": "chatcmpl-standin", "object": "chat.completion", "model": model_id,
                "choices": [{"index": 0, "finish_reason": finish,
                             "message": {"role": "assistant", "content": tokenizer.decode(output, skip_special_tokens=True)}}],
                "usage": {"prompt_tokens": len(ids), "completion_tokens": len(output), "total_tokens": len(ids) + len(output)},
            }

        def _json(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer((args.host or "127.0.0.1", args.port or 8000), Handler)
    server.daemon_threads = True
    print(f"INFO:     Uvicorn running on http://{args.host or '127.0.0.1'}:{args.port or 8000}", file=sys.stderr, flush=True)
    print("INFO:     Application startup complete.", file=sys.stderr, flush=True)
    server.serve_forever()


def _error(message: str) -> dict:
    return {"object": "error", "message": message, "type": "BadRequestError", "param": None, "code": 400}


def _response_format_problem(response_format) -> str | None:
    if response_format is None:
        return None
    if not isinstance(response_format, dict) or response_format.get("type") not in ("text", "json_object", "json_schema"):
        return f"response_format.type must be text, json_object or json_schema: {response_format!r}"
    if response_format["type"] == "json_schema":
        spec = response_format.get("json_schema")
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or not isinstance(spec.get("schema"), dict):
            return "response_format.json_schema needs a name and a schema object"
        try:
            from jsonschema import Draft202012Validator

            Draft202012Validator.check_schema(spec["schema"])
        except ImportError:
            pass
        except Exception as error:  # noqa: BLE001 - jsonschema.SchemaError and its relatives
            return f"response_format.json_schema.schema is not a JSON schema: {error}"
    return None


if __name__ == "__main__":
    main()
