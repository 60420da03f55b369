"""The one exception type users see, and the decorator that turns it into one line + exit code 2."""

import sys
from functools import wraps


class MinimultError(Exception):
    """Bad input or an impossible request; the message is the whole explanation."""


def fail_cleanly(f):
    """For CLI commands: a MinimultError becomes one `error: ...` line on stderr and exit code 2."""
    @wraps(f)
    def wrapper(*args, **kwargs):
        try:
            return f(*args, **kwargs)
        except MinimultError as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(2)
        except KeyboardInterrupt:
            print("interrupted: checkpointed work is kept; rerun with --resume to continue", file=sys.stderr)
            sys.exit(130)
    return wrapper
