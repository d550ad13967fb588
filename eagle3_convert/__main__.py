"""`python -m eagle3_convert ...` is the `eagle3-convert` command."""

import sys

INTERRUPTED = "interrupted: nothing was written to the destination"

try:  # a Ctrl-C this early (Python is still finding modules) is no traceback either
    import signal
except KeyboardInterrupt:
    print(INTERRUPTED, file=sys.stderr)
    sys.exit(130)


def run() -> None:
    """The console script: a Ctrl-C while the CLI is still being imported is no traceback either."""
    try:
        from .cli import main
    except KeyboardInterrupt:  # nothing has been read or written yet
        print(INTERRUPTED, file=sys.stderr)
        sys.exit(130)
    try:
        main(prog_name="eagle3-convert")
    finally:
        # The command has finished and said so: a late Ctrl-C (Python restores the default action while it
        # shuts down) must not turn its exit status into "killed by SIGINT".
        signal.signal(signal.SIGINT, signal.SIG_IGN)


if __name__ == "__main__":
    run()
