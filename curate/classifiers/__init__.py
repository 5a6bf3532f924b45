from curate.classifiers.base import (
    Classifier,
    UnknownClassifierError,
    get_classifier,
    needs_model_server,
    register,
    registered_names,
    resolve_name,
)

__all__ = [
    "Classifier",
    "UnknownClassifierError",
    "get_classifier",
    "needs_model_server",
    "register",
    "registered_names",
    "resolve_name",
]
