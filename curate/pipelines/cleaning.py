"""A builder's optional clean-up of what it wrote: MinHash near-duplicate removal and n-gram decontamination.

One config for the five builders that offer it (build, multihop, priming, mcqa, cpt): the command line builds it
from `--dedup / --decontam / --benchmarks-dir` (curate.cli.groups.cleaning_group) and the flows from their
`cleaning` parameter, and both hand `arguments()` to the builder. `validate()` reads the benchmark list as the
decontamination will, so a misspelt benchmark or a missing local copy fails before the build, not after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from curate.errors import CurateError
from curate.options import CleaningFields
from curate.pipelines.decontam import parse_against


class CleaningError(CurateError, ValueError):
    pass


@dataclass(frozen=True)
class Cleaning(CleaningFields):
    """A builder's clean-up of what it wrote (CleaningFields: --dedup, --decontam, --benchmarks-dir), checked before
    the build starts."""

    def validate(self) -> None:
        if self.benchmarks_dir is not None:
            if not self.decontam:
                raise CleaningError("--benchmarks-dir applies to --decontam only")
            if not Path(self.benchmarks_dir).expanduser().is_dir():
                raise CleaningError(f"--benchmarks-dir {self.benchmarks_dir} is not a directory")
        if self.decontam is not None:
            if not any(part.strip() for part in self.decontam.split(",")):
                raise CleaningError("--decontam names no benchmark; give them as gsm8k,math500 or FILE=FIELD")
            parse_against(self.decontam, self.benchmarks_dir)  # BenchmarkError names the benchmark and the fix

    def arguments(self) -> dict:
        """The builders' keyword arguments (run_build, run_multihop, run_priming, run_mcqa, run_cpt)."""
        return {"dedup": self.dedup, "decontam": self.decontam, "benchmarks_dir": self.benchmarks_dir}
