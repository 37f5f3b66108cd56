"""The `energon` command of the package (`energon ...` or `python -m energon_rs ...`): the same
command line as the `energon` program, run in this process, with `analyze-debug` (which reads
worker debug logs in Python) besides."""

from __future__ import annotations

import signal
import sys
from typing import Optional, Sequence

from . import _native


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Runs `energon` with `argv` (default: this process's arguments after the program name)
    and exits with its status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["analyze-debug"]:
        from .cli import analyze_debug_command

        analyze_debug_command.main(args=args[1:], prog_name="energon analyze-debug")
        return
    # Ctrl-C ends the command as it ends the program (Python would only note it while the
    # command runs in Rust).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.stdout.flush()
    sys.exit(_native.run_cli(["energon", *args]))


if __name__ == "__main__":
    main()
