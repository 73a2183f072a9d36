"""The one exception type for errors a user can cause."""


class FpgaplaceError(Exception):
    """A user-facing error: bad file, unknown board, infeasible placement, unsupported op.

    The message is one line naming the file, node or field and what was expected; the CLI
    prints it without a traceback and exits non-zero.
    """
