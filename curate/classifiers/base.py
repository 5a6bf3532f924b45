"""One interface for every behavior classifier: a batch of texts in, one `Labels` per text out.

Classifiers know nothing of datatrove or Prefect. They are registered under versioned names
(`cues_v1`); a bare family name (`cues`) resolves to its newest version, and a spec may carry
an argument after a colon (`distilled:MODEL_DIR`).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

from curate.schema import Labels


class Classifier(ABC):
    name: str  # versioned, e.g. "cues_v1"
    model: str | None = None
    prompt_version: str | None = None

    @abstractmethod
    def classify(self, texts: Sequence[str]) -> list[Labels]:
        """Label a batch; must return exactly one Labels per text, in order."""


class UnknownClassifierError(ValueError):
    pass


_REGISTRY: dict[str, Callable[..., Classifier]] = {}
_VERSIONED = re.compile(r"^(?P<family>[a-z][a-z0-9_]*?)_v(?P<version>\d+)$")


def register(name: str):
    if not _VERSIONED.match(name):
        raise ValueError(f"classifier names are versioned like 'cues_v1', got {name!r}")

    def decorator(factory: Callable[..., Classifier]):
        if name in _REGISTRY:
            raise ValueError(f"classifier {name!r} is already registered")
        _REGISTRY[name] = factory
        return factory

    return decorator


def registered_names() -> list[str]:
    _load_builtin()
    return sorted(_REGISTRY)


def resolve_name(spec: str) -> tuple[str, str | None]:
    """'cues' -> ('cues_v1', None); 'distilled:dir' -> ('distilled_v1', 'dir')."""
    _load_builtin()
    name, _, argument = spec.partition(":")
    name = name.strip()
    if name not in _REGISTRY:
        versions = [
            (int(m["version"]), n) for n in _REGISTRY if (m := _VERSIONED.match(n)) and m["family"] == name
        ]
        if not versions:
            raise UnknownClassifierError(
                f"unknown classifier {spec!r}. Known: {', '.join(registered_names())} "
                "(a family name such as 'cues' picks its newest version)"
            )
        name = max(versions)[1]
    return name, (argument or None)


def get_classifier(spec: str, **options) -> Classifier:
    name, argument = resolve_name(spec)
    factory = _REGISTRY[name]
    return factory(argument, **options) if argument is not None else factory(**options)


def _load_builtin() -> None:
    # Importing the modules runs their @register decorators.
    from curate.classifiers import cascade, cues, distilled, llm  # noqa: F401
