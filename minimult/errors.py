"""The one exception type users see, the lower-bound check of a config section's settings that raises it, the
nearest valid name for an unknown one, and the decorator that turns it into one line + exit code 2 (a Ctrl-C:
one line + 130; `terminate_as_interrupt` makes a SIGTERM one)."""

import difflib
import os
import signal
import sys
from functools import wraps


class MinimultError(Exception):
    """Bad input or an impossible request; the message is the whole explanation."""


class Interrupted(KeyboardInterrupt):
    """A Ctrl-C that knows what was kept and how to go on (its message); the CLI exits 130 with it."""


def check_at_least(section: str, settings, minimum: int, *names: str) -> None:
    """Each setting `names` of `settings` (a config section's dataclass) is >= `minimum`, else one error line."""
    for name in names:
        if getattr(settings, name) < minimum:
            raise MinimultError(f"{section}.{name} must be >= {minimum}, got {getattr(settings, name)}")


def did_you_mean(name, valid, shown: dict | None = None) -> str:
    """' (did you mean 'lang-pos'?)' for the valid name nearest an unknown one, '' when none is near (`shown`:
    what to write for a valid name, where not itself)."""
    near = difflib.get_close_matches(str(name), [str(v) for v in valid], n=1)
    return f" (did you mean {(shown or {}).get(near[0], near[0])!r}?)" if near else ""


def terminate_as_interrupt() -> None:
    """From here on SIGTERM (`kill PID`) stops this process as Ctrl-C does (KeyboardInterrupt: what was kept is said
    in one line); a process forked from it later (another pid: a sweep's worker) still ends of it at once."""
    pid = os.getpid()

    def handler(signum, frame):
        if os.getpid() != pid:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def fail_cleanly(f):
    """For CLI commands: a MinimultError becomes one `error: ...` line on stderr and exit code 2; a SIGTERM handler
    the command set (`terminate_as_interrupt`) ends with it (a command run in-process, as tests do)."""
    @wraps(f)
    def wrapper(*args, **kwargs):
        term = signal.getsignal(signal.SIGTERM)
        try:
            return f(*args, **kwargs)
        except MinimultError as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(2)
        except OSError as e:  # a full disk, a read-only folder, a vanished file: the system's own words
            where = f" ({e.filename})" if getattr(e, "filename", None) else ""
            print(f"error: {e.strerror or e}{where}", file=sys.stderr)
            sys.exit(2)
        except KeyboardInterrupt as e:
            print(f"interrupted: {str(e) or 'what was written before is kept'}", file=sys.stderr)
            sys.exit(130)
        finally:
            if term is not None and signal.getsignal(signal.SIGTERM) is not term:  # set here: the main thread
                signal.signal(signal.SIGTERM, term)
    return wrapper
