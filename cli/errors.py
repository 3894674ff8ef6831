"""The one error the commands raise for the user: printed as a single line, never a traceback."""

from __future__ import annotations

USAGE = 2  # bad arguments, bad URL, unreadable file, missing key variable
FAILED = 1  # the server is unreachable, answers wrongly, or the work could not be done


class CliError(Exception):
    """A problem the user can fix; ``exit_code`` is USAGE or FAILED."""

    def __init__(self, message: str, exit_code: int = USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code
