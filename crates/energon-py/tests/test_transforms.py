"""`MergeTransform`: geometric transforms composed into one resampling."""

from __future__ import annotations

import numpy as np
import pytest

Image = pytest.importorskip("PIL.Image")

from energon_rs.transforms import CustomTransform, MergeTransform  # noqa: E402


def _image(w=40, h=30, seed=0):
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8))


class Shift(CustomTransform):
    def __init__(self, dx, dy):
        self.dx, self.dy = dx, dy

    def apply_transform(self, matrix, dst_size):
        return self.translate(self.dx, self.dy) @ matrix, dst_size, ("Shift", (self.dx, self.dy))


class Mirror(CustomTransform):
    def apply_transform(self, matrix, dst_size):
        return self.hflip(dst_size[0]) @ matrix, dst_size, ("Mirror", ())


class Half(CustomTransform):
    def apply_transform(self, matrix, dst_size):
        return self.scale(0.5, 0.5) @ matrix, dst_size // 2, ("Half", ())


def test_custom_matrices_compose_into_one_exact_resampling():
    img = _image()
    ref = Image.new(img.mode, img.size)
    ref.paste(img, (5, 3))
    assert np.array_equal(np.array(MergeTransform([Shift(5, 3)])(img)), np.array(ref))
    mirrored = np.array(MergeTransform([Mirror()])(img))
    assert np.array_equal(mirrored, np.array(img)[:, ::-1])
    both = np.array(MergeTransform([Mirror(), Mirror(), Shift(2, 0), Shift(-2, 0)])(img))
    assert np.array_equal(both, np.array(img))
    half = MergeTransform([Half()])(img)
    assert half.size == (20, 15)
    assert np.array_equal(np.array(half), np.array(img)[1::2, 1::2])


def test_refuses_what_it_cannot_merge():
    with pytest.raises(TypeError, match="PIL images"):
        MergeTransform([Shift(1, 1)])(np.zeros((3, 3)))
    with pytest.raises(NotImplementedError, match="cannot be merged"):
        MergeTransform([object()])(_image())


def test_torchvision_transforms_draw_and_match_as_themselves():
    torch = pytest.importorskip("torch")
    T = pytest.importorskip("torchvision.transforms")
    img = _image(64, 48)
    for transform in (
        T.RandomCrop((20, 30)),
        T.CenterCrop(50),
        T.RandomHorizontalFlip(p=0.9),
        T.Resize((24, 32), interpolation=T.InterpolationMode.NEAREST),
    ):
        torch.manual_seed(3)
        merged = np.array(MergeTransform([transform])(img))
        torch.manual_seed(3)
        direct = np.array(transform(img))
        assert merged.shape == direct.shape and np.abs(merged.astype(int) - direct).max() <= 2
    torch.manual_seed(5)
    merged = np.array(MergeTransform([T.RandomHorizontalFlip(p=1.0), T.RandomCrop(16)])(img))
    torch.manual_seed(5)
    direct = np.array(T.RandomCrop(16)(T.RandomHorizontalFlip(p=1.0)(img)))
    assert np.array_equal(merged, direct)
