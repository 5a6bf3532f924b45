"""The one base of every error curate reports to a user.

A `CurateError` is a problem with the input, the options or the state on disk that the user can fix; the
CLI prints its message on one line (the message says how to fix it) and exits 2, wherever it was raised.
Each layer keeps its own subclasses (CPTError, TagsMismatchError, ...) so callers can still catch one kind;
most also derive from the builtin they were before (ValueError, RuntimeError), so existing handlers hold.
The three below are for layers without a kind of their own. Any other exception that reaches the CLI is a
bug and keeps its traceback; only OSError (a missing file, a refused permission, a full disk) stays one line.
"""


class CurateError(Exception):
    """Every error curate reports to a user: the CLI prints its message on one line and exits 2."""


class OptionError(CurateError, ValueError):
    """An option's value is out of range, unknown, or contradicts another option; the message names the option."""


class InputError(CurateError, ValueError):
    """A file or dataset the user gave cannot be used as it is (a missing column, no usable row, a bad entry)."""


class IncompleteRunError(CurateError, RuntimeError):
    """Some tasks of a run did not finish (a killed worker, a full disk); rerunning the command finishes them."""
