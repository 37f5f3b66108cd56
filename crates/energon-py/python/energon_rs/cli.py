"""The `energon` commands as `click` commands, for code that invokes them from Python (such as
`click.testing.CliRunner`): each runs the `energon` program of this project with the same
arguments, feeds it the input given (answers to its prompts, one a line, as the reference's
prompts read them), and echoes what it prints. A failure exits with status 1, as the
reference's commands do.

The program is `$ENERGON_BIN` when set, else this package's own command (`python -m energon_rs`,
the command line the `energon` program runs).
"""

from __future__ import annotations

import os
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


def energon_program() -> list[str]:
    """The command that runs `energon`: `$ENERGON_BIN` when set, else this package's."""
    env = os.environ.get("ENERGON_BIN")
    if env:
        return [env]
    return [sys.executable, "-m", "energon_rs"]


def _run(subcommand: list[str], args: tuple[str, ...]) -> None:
    data = None if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
    env = dict(os.environ)
    if data:
        # The program's prompts read the answers given, though its input is no terminal.
        env["ENERGON_INTERACTIVE"] = "1"
    res = subprocess.run(
        [*energon_program(), *subcommand, *args],
        input=data,
        capture_output=True,
        text=True,
        env=env,
    )
    if res.stdout:
        click.echo(res.stdout, nl=False)
    if res.stderr:
        click.echo(res.stderr, nl=False, err=True)
    if res.returncode != 0:
        # COMPAT(energon 7.4.1): its click commands exit with 1 when they fail.
        sys.exit(1)


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


@click.command(
    name="redist",
    context_settings={"ignore_unknown_options": True, "help_option_names": []},
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def command_redist(args: tuple[str, ...]) -> None:
    """Redistributes checkpoints over another number of ranks (energon checkpoint redist).
    Inputs may also be loader states saved with `torch.save(loader.save_state_rank(), ...)`:
    their checkpoint bytes are redistributed, and the outputs are saved the same way."""
    paths = [a for a in args if not a.startswith("-") and not _is_option_value(args, a)]
    if len(paths) < 2 or not any(_is_torch_file(p) for p in paths[:-1]):
        _run(["checkpoint", "redist"], args)
        return
    import tempfile

    import torch

    inputs, output = paths[:-1], paths[-1]
    with tempfile.TemporaryDirectory() as tmp:
        replaced = {}
        for i, path in enumerate(inputs):
            if _is_torch_file(path):
                state = torch.load(path, weights_only=True)
                if not isinstance(state, dict) or "checkpoint" not in state:
                    raise click.ClickException(f"{path} is not a saved energon_rs loader state")
                raw = os.path.join(tmp, "in", str(i), os.path.basename(path))
                os.makedirs(os.path.dirname(raw))
                with open(raw, "wb") as f:
                    f.write(state["checkpoint"])
                replaced[path] = (raw, state)
        out_dir = os.path.join(tmp, "out")
        rewritten = [replaced[a][0] if a in replaced else (out_dir if a == output else a) for a in args]
        _run(["checkpoint", "redist"], tuple(rewritten))
        template = next(iter(replaced.values()))[1]
        os.makedirs(output, exist_ok=True)
        for rank, name in enumerate(sorted(os.listdir(out_dir), key=_natural)):
            with open(os.path.join(out_dir, name), "rb") as f:
                checkpoint = f.read()
            torch.save({**template, "rank": rank, "checkpoint": checkpoint}, os.path.join(output, name))


def _is_option_value(args: tuple[str, ...], arg: str) -> bool:
    i = args.index(arg)
    return i > 0 and args[i - 1] == "--new-world-size"


def _is_torch_file(path: str) -> bool:
    import zipfile

    return os.path.isfile(path) and zipfile.is_zipfile(path)


def _natural(name: str) -> list:
    import re

    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


@click.command(name="analyze-debug")
@click.argument("log_paths", nargs=-1, type=click.Path(exists=True))
@click.option("--heatmap-path", default="heatmap.png", show_default=True,
              help="Where to write the heatmap of samples read per step (PNG).")
@click.option("--heatmap-steps", type=int, default=1000, show_default=True,
              help="Largest heatmap size in the step direction (steps are binned to fit).")
@click.option("--heatmap-samples", type=int, default=1000, show_default=True,
              help="Largest heatmap size in the sample direction (samples are binned to fit).")
@click.option("--heatmap-gain", type=float, default=10, show_default=True,
              help="Intensity factor of the heatmap.")
@click.option("--force-loading-order", is_flag=True,
              help="Accepted for compatibility: steps are always in the loader's order.")
@click.option("--include-modality", default="train", show_default=True,
              help="Loaders to include: train, val, or both comma-separated.")
@click.option("--skip", type=int, default=0, help="Steps to leave out at the start.")
@click.option("--no-colors", is_flag=True, help="One colour for all loaders.")
def analyze_debug_command(
    log_paths: tuple[str, ...],
    heatmap_path: str,
    heatmap_steps: int,
    heatmap_samples: int,
    heatmap_gain: float,
    force_loading_order: bool,
    include_modality: str,
    skip: int,
    no_colors: bool,
) -> None:
    """Summarizes worker debug logs (`WorkerConfig(worker_debug_path=..., worker_log_level=1)`):
    the samples each step read, and a heatmap of them."""
    from .debug_log import analyze

    modalities = {m.strip() for m in include_modality.split(",") if m.strip()}
    for line in analyze(list(log_paths), modalities, heatmap_path, heatmap_steps=heatmap_steps,
                        heatmap_samples=heatmap_samples, heatmap_gain=heatmap_gain, skip=skip,
                        colors=not no_colors):
        click.echo(line)
