"""`energon_rs.cli`: the `energon` commands as click commands, forwarding to the program."""

from __future__ import annotations

import shutil

import pytest

from conftest import REF_SMALL, energon_bin

click_testing = pytest.importorskip("click.testing")


@pytest.fixture
def runner(monkeypatch):
    monkeypatch.setenv("ENERGON_BIN", str(energon_bin()))
    return click_testing.CliRunner()


def test_prepare_and_info_forward_to_the_program(runner, tmp_path):
    from energon_rs.cli import info_command, prepare_command

    ds = tmp_path / "ds"
    (ds / "shards").mkdir(parents=True)
    for tar in (REF_SMALL / "shards").glob("*.tar"):
        shutil.copyfile(tar, ds / "shards" / tar.name)
    args = [str(ds), "--non-interactive", "--split-ratio=1,0,0", "--sample-type=CaptioningSample",
            '--field-map={"image": "jpg", "caption": "txt"}']
    res = runner.invoke(prepare_command, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines()[-1] == "Done"
    assert (ds / ".nv-meta" / "dataset.yaml").is_file()
    res = runner.invoke(info_command, [str(ds)], catch_exceptions=False)
    assert res.exit_code == 0 and "200" in res.stdout
    res = runner.invoke(prepare_command, [str(tmp_path / "missing")])
    assert res.exit_code == 1
    # Answers given as input reach the prompts, as the reference's: overwrite, split, a
    # dataset.yaml, CaptioningSample, a field map and its two fields.
    res = runner.invoke(prepare_command, [str(ds)], input="y\n1,0,0\ny\n0\nY\njpg\ntxt\n",
                        catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "field_map:\n  image: jpg\n  caption: txt\n" in (ds / ".nv-meta" / "dataset.yaml").read_text()


def test_without_energon_bin_the_packages_own_command_runs(monkeypatch, ref_small):
    from energon_rs.cli import info_command

    monkeypatch.setenv("ENERGON_BIN", "")
    monkeypatch.setenv("PATH", "")
    res = click_testing.CliRunner().invoke(info_command, [str(ref_small)])
    assert res.exit_code == 0, res.output
    assert "CaptioningSample" in res.output


def test_the_wheel_installs_the_energon_command(tmp_path, ref_small):
    """`pip install` gives the `energon` command, the same command line as the program."""
    import subprocess
    import sys
    from pathlib import Path

    program = Path(sys.executable).parent / "energon"
    assert program.exists(), "the package's console script is not installed"
    version = subprocess.run([program, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("energon energon-rs ")
    info = subprocess.run([program, "info", ref_small], capture_output=True, text=True)
    assert info.returncode == 0 and "CaptioningSample" in info.stdout, info.stderr
    # Errors and usage as the program reports them.
    missing = subprocess.run([program, "info", tmp_path / "nothing"], capture_output=True, text=True)
    assert missing.returncode == 2 and missing.stderr.startswith("error: ")
    usage = subprocess.run([program, "no-such-command"], capture_output=True, text=True)
    assert usage.returncode == 2 and "no-such-command" in usage.stderr
    # A closed stdout ends it quietly.
    head = subprocess.run(
        f"'{program}' preview '{ref_small}' --num-samples 200 | head -c 10",
        shell=True, capture_output=True, text=True,
    )
    assert head.returncode == 0 and "panicked" not in head.stderr, head.stderr
    # The reference's analyze-debug, which reads worker debug logs in Python.
    res = subprocess.run([program, "analyze-debug", "--help"], capture_output=True, text=True)
    assert res.returncode == 0 and "heatmap" in res.stdout


def test_prepare_of_a_jsonl_file_reports_its_samples(runner, tmp_path):
    from energon_rs.cli import prepare_command

    path = tmp_path / "data.jsonl"
    path.write_text("".join(f'{{"text": "{i}"}}\n' for i in range(7)))
    res = runner.invoke(prepare_command, [str(path)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines() == [f"Found 7 samples in the JSONL dataset {path}", "Done"]
    assert path.with_suffix(".jsonl.idx").is_file()


def test_redist_of_torch_saved_loader_states(runner, tmp_path):
    torch = pytest.importorskip("torch")
    import energon_rs
    from energon_rs.cli import command_redist

    def dataset(rank, world_size):
        wc = energon_rs.WorkerConfig(rank=rank, world_size=world_size, num_workers=2 // world_size)
        return energon_rs.get_train_dataset(REF_SMALL, worker_config=wc, batch_size=2,
                                            shuffle_buffer_size=4, max_samples_per_sequence=2)

    loader = energon_rs.get_savable_loader(dataset(0, 1))
    for _ in zip(range(4), loader):
        pass
    saved = tmp_path / "state_rank0.pt"
    torch.save(loader.save_state_rank(), saved)
    following = [b.__key__ for _, b in zip(range(4), loader)]
    out = tmp_path / "out"
    res = runner.invoke(command_redist, ["--new-world-size", "2", str(saved), str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.iterdir()) == ["state_rank0.pt", "state_rank1.pt"]
    keys = []
    for rank in range(2):
        state = torch.load(out / f"state_rank{rank}.pt", weights_only=True)
        assert state["rank"] == rank
        restored = energon_rs.get_savable_loader(dataset(rank, 2))
        restored.restore_state_rank(state)
        keys.append([b.__key__ for _, b in zip(range(2), restored)])
    # Each new rank continues one of the old workers: together they give the same batches.
    assert sorted(map(tuple, keys[0] + keys[1])) == sorted(map(tuple, following))
