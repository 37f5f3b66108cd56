"""The `energon` commands as `click` commands, for code that invokes them from Python (such as
`click.testing.CliRunner`): each runs the `energon` program of this project with the same
arguments, feeds it the input given, and echoes what it prints; its exit status becomes the
command's.

The program is `$ENERGON_BIN`, else `energon` on `PATH`. `click` is needed only by this module.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Any

import click

__all__ = [
    "analyze_debug_command",
    "checkpoint_command",
    "command_redist",
    "info_command",
    "lint_command",
    "prepare_command",
    "prepare_media_command",
    "preview_command",
]


def energon_program() -> str:
    """The path of the `energon` program (`$ENERGON_BIN`, else `energon` on `PATH`)."""
    env = os.environ.get("ENERGON_BIN")
    if env:
        return env
    found = shutil.which("energon")
    if found is None:
        raise click.ClickException(
            "the energon program was not found: put it on PATH or set ENERGON_BIN"
        )
    return found


def _run(subcommand: list[str], args: tuple[str, ...]) -> None:
    data = None if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
    res = subprocess.run(
        [energon_program(), *subcommand, *args],
        input=data,
        capture_output=True,
        text=True,
    )
    if res.stdout:
        click.echo(res.stdout, nl=False)
    if res.stderr:
        click.echo(res.stderr, nl=False, err=True)
    if res.returncode != 0:
        sys.exit(res.returncode)


def _forwarding(name: str, subcommand: list[str], help_text: str) -> Any:
    @click.command(
        name=name,
        help=help_text,
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                          "help_option_names": []},
    )
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def command(args: tuple[str, ...]) -> None:
        _run(subcommand, args)

    return command


prepare_command = _forwarding("prepare", ["prepare"], "Prepares a dataset (energon prepare).")
prepare_media_command = _forwarding(
    "prepare-media", ["prepare-media"], "Stores media metadata (energon prepare-media)."
)
info_command = _forwarding("info", ["info"], "Describes a dataset (energon info).")
lint_command = _forwarding("lint", ["lint"], "Checks every sample (energon lint).")
preview_command = _forwarding("preview", ["preview"], "Shows samples (energon preview).")
checkpoint_command = _forwarding(
    "checkpoint", ["checkpoint"], "Inspects and redistributes checkpoints (energon checkpoint)."
)
command_redist = _forwarding(
    "redist", ["checkpoint", "redist"], "Redistributes a checkpoint (energon checkpoint redist)."
)


@click.command(name="analyze-debug")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def analyze_debug_command(args: tuple[str, ...]) -> None:
    """Analyzes worker debug logs: not available (the energon program has no such command)."""
    raise click.ClickException("analyze-debug is not supported by energon_rs")
