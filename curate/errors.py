"""The one base of every error curate reports to a user.

A `CurateError` is a problem with the input, the options or the state on disk that the user can fix; the
CLI prints its message on one line (the message says how to fix it) and exits 2, wherever it was raised.
Each layer keeps its own subclasses (CPTError, TagsMismatchError, ...) so callers can still catch one kind;
most also derive from the builtin they were before (ValueError, RuntimeError), so existing handlers hold.
"""


class CurateError(Exception):
    """Every error curate reports to a user: the CLI prints its message on one line and exits 2."""
