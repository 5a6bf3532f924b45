"""What `curate tag` loads before it tags (issue 18 part 4: start-up). bench/tag_throughput.py measures the time."""

from __future__ import annotations

import subprocess
import sys


def test_cue_tagging_does_not_load_the_llm_runner():
    """`curate tag` with cues imports the cheap tag job and builds a ServerOptions for its model-server options, but
    not datatrove's inference runner (most of a second of start-up), which only LLM jobs need."""
    code = (
        "import sys, curate.cli, curate.pipelines.tag, curate.pipelines.llm.options\n"
        "loaded = [m for m in ('datatrove.pipeline.inference.run_inference', 'curate.pipelines.llm.server',"
        " 'curate.pipelines.tagging') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
