"""`energon_rs.compat.install()`: code written for `megatron.energon` imports energon_rs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import energon_rs
import energon_rs.compat as compat

COMPAT_DOC = Path(__file__).resolve().parents[3] / "docs" / "compat.md"


@pytest.fixture
def installed():
    compat.install()
    yield
    compat.uninstall()


def test_the_package_and_its_submodules_resolve_to_energon_rs(installed):
    from megatron.energon import WorkerConfig, get_train_dataset
    from megatron.energon.flavors import CaptioningSample
    from megatron.energon.task_encoder.base import TaskEncoder, stateless
    import megatron.energon.rng

    assert get_train_dataset is energon_rs.get_train_dataset
    assert WorkerConfig is energon_rs.WorkerConfig
    assert CaptioningSample is energon_rs.CaptioningSample
    assert (TaskEncoder, stateless) == (energon_rs.TaskEncoder, energon_rs.stateless)
    assert megatron.energon.rng.SystemRng is energon_rs.SystemRng


def test_a_name_energon_rs_lacks_is_an_import_error_that_says_so(installed):
    missing = compat.missing_names()[0]
    with pytest.raises(ImportError, match=f"energon_rs does not provide megatron.energon's {missing}"):
        exec(f"from megatron.energon import {missing}")
    with pytest.raises(ModuleNotFoundError):
        import megatron.energon.no_such_module  # noqa: F401


def test_top_level_modules_named_like_submodules_stay_their_own(installed, tmp_path, monkeypatch):
    """Only `megatron.energon...` is served: PyAV's `av` or a project's own `tools` module
    (names of the reference's submodules) import as themselves."""
    (tmp_path / "tools.py").write_text("MINE = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("tools", None)
    import tools

    assert tools.MINE and tools.__file__ == str(tmp_path / "tools.py")
    sys.modules.pop("tools", None)
    with pytest.raises(ModuleNotFoundError):
        import rng  # noqa: F401  (a submodule name of the reference, not a module here)


def test_uninstall_forgets_the_aliases():
    compat.install()
    import megatron.energon  # noqa: F401

    compat.uninstall()
    assert "megatron.energon" not in sys.modules
    with pytest.raises(ModuleNotFoundError):
        import megatron.energon  # noqa: F401,F811


def test_a_user_script_runs_unchanged(ref_small):
    """A training script written for megatron.energon, with only the install line added."""
    code = f"""
import energon_rs.compat
energon_rs.compat.install()
from megatron.energon import WorkerConfig, get_savable_loader, get_train_dataset, DefaultTaskEncoder
from megatron.energon.task_encoder.base import stateless

class Encoder(DefaultTaskEncoder):
    @stateless
    def encode_sample(self, sample):
        return sample

ds = get_train_dataset({str(ref_small)!r}, worker_config=WorkerConfig(rank=0, world_size=1, num_workers=2),
    batch_size=4, shuffle_buffer_size=16, max_samples_per_sequence=None, task_encoder=Encoder())
loader = get_savable_loader(ds)
batch = next(iter(loader))
print(len(batch.__key__))
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (res.returncode, res.stdout.strip()) == (0, "4"), res.stderr


def test_the_missing_names_in_the_docs_are_the_missing_names():
    text = COMPAT_DOC.read_text()
    match = re.search(r"<!-- missing-names -->\n(.*?)\n<!-- /missing-names -->", text, re.S)
    assert match, "docs/compat.md lacks its list of missing megatron.energon names"
    listed = re.findall(r"`([A-Za-z_0-9]+)`", match.group(1))
    assert listed == compat.missing_names(), (
        "update docs/compat.md's list to: " + ", ".join(f"`{n}`" for n in compat.missing_names())
    )


def test_submodules_with_a_name_of_the_package_keep_the_name(installed):
    import megatron.energon.edataclass  # noqa: F401
    from megatron.energon import edataclass
    from megatron.energon.tools.info import command as info
    from megatron.energon.tools.prepare import command as prepare

    assert edataclass is energon_rs.edataclass
    assert (info.name, prepare.name) == ("info", "prepare")


def test_install_hands_out_torch_tensors_by_default(ref_small):
    import energon_rs.loader

    compat.install()
    try:
        assert energon_rs.loader.DEFAULT_TORCH is True
    finally:
        compat.uninstall()
    assert energon_rs.loader.DEFAULT_TORCH is False
