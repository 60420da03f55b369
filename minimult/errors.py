"""The one exception type users see: the CLI prints its message on one line and exits non-zero."""


class MinimultError(Exception):
    """Bad input or an impossible request; the message is the whole explanation."""
