"""The reference's PIL image decode modes: `pil` (RGB, as `pilrgb`), `pill`, `pilrgba`."""

from __future__ import annotations

import numpy as np
import pytest

import energon_rs

PIL = pytest.importorskip("PIL.Image")


def _val(ref_small, wc, image_decode, batch_size=None):
    return energon_rs.get_val_dataset(
        ref_small,
        split_part="train",
        worker_config=wc,
        batch_size=batch_size,
        image_decode=image_decode,
    )


@pytest.mark.parametrize(
    "mode, pil_mode, array_mode", [("pil", "RGB", "rgb8"), ("pilrgb", "RGB", "rgb8"),
                                   ("pill", "L", "l8"), ("pilrgba", "RGBA", "rgba8")]
)
def test_images_are_pil_images_with_the_arrays_pixels(ref_small, mode, pil_mode, array_mode):
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=0)
    pil = next(iter(energon_rs.get_loader(_val(ref_small, wc, mode))))
    array = next(iter(energon_rs.get_loader(_val(ref_small, wc, array_mode))))
    assert pil.__key__ == array.__key__
    assert isinstance(pil.image, PIL.Image)
    assert pil.image.mode == pil_mode
    assert np.array_equal(np.asarray(pil.image), np.asarray(array.image))
    assert isinstance(pil.caption, str)


def test_batches_list_pil_images(ref_small):
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2)
    batch = next(iter(energon_rs.get_loader(_val(ref_small, wc, "pil", batch_size=3))))
    assert len(batch.__key__) == 3
    assert isinstance(batch.image, list) and len(batch.image) == 3
    assert all(isinstance(image, PIL.Image) and image.mode == "RGB" for image in batch.image)
    assert len(batch.caption) == 3


def test_an_unknown_mode_is_a_config_error(ref_small):
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=0)
    with pytest.raises(energon_rs.ConfigError, match="pilcmyk"):
        _val(ref_small, wc, "pilcmyk")
