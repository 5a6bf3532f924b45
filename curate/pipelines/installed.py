"""A datatrove step whose dependencies are curate's own skips datatrove's check that they are installed.

datatrove's `PipelineStep.__new__` checks every step's `_requires_dependencies` (orjson, pyarrow, datasets) by
parsing the metadata of every installed distribution, once per name and process: 0.3 s of each `curate tag` start on
an environment of ~200 packages, a seventh of the whole start. curate depends on those packages itself
(pyproject's `dependencies`), so for its steps the check cannot fail; tests/pipelines/test_datatrove_hooks.py checks
that the hook is still datatrove's and tests/pipelines/test_installed.py that the names stay curate's dependencies.
A step with an optional dependency (one of curate's extras) must not use this: its missing package should fail at
construction with datatrove's install hint.
"""

from __future__ import annotations


class InstalledWithCurate:
    """Mixin, first in a datatrove step's bases: construct without datatrove's installed-distribution scan."""

    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)
