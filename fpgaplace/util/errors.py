"""The one exception type for errors a user can cause."""


class FpgaplaceError(Exception):
    """A user-facing error: bad file, unknown board, infeasible placement, unsupported op.

    The message is one line naming the file, node or field and what was expected; the CLI
    prints it without a traceback and exits non-zero.
    """


def first_line(error: BaseException) -> str:
    """The first non-blank line of ``error``'s message (its type name if it has none), for
    wrapping a library's multi-line error into a one-line ``FpgaplaceError``."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__
