"""Geometric image transforms merged into one resampling: `MergeTransform`.

    merged = MergeTransform([T.RandomRotation((-30, 30)), T.RandomCrop(224), T.RandomHorizontalFlip()])
    out = merged(pil_image)

Each torchvision transform of the list draws its random parameters exactly as it would itself
(same calls to torch's generator, in the same order), and contributes a 3x3 matrix that maps
source pixel coordinates to its output's; the product is applied to the image once, with one
interpolation, instead of resampling after every step. `CustomTransform` subclasses add their
own matrices. Supported: `Resize`, `RandomResizedCrop`, `RandomHorizontalFlip`,
`RandomVerticalFlip`, `RandomRotation`, `RandomCrop`, `CenterCrop`, `RandomPerspective`.

Coordinates are continuous: pixel `(i, j)` covers `[i, i+1) x [j, j+1)`, as in PIL's
transforms. PIL and torch (with torchvision) are needed only by this module.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

__all__ = ["CustomTransform", "MergeTransform"]


def _translate(x: float, y: float) -> np.ndarray:
    return np.array([[1.0, 0.0, x], [0.0, 1.0, y], [0.0, 0.0, 1.0]])


def _scale(x: float, y: float) -> np.ndarray:
    return np.array([[x, 0.0, 0.0], [0.0, y, 0.0], [0.0, 0.0, 1.0]])


class CustomTransform:
    """A transform of a `MergeTransform` defined by its matrix: `apply_transform(matrix,
    dst_size)` returns the matrix with this transform's applied after it (`self.translate(...)
    @ matrix`), the output size `[width, height]`, and a description of its parameters."""

    def apply_transform(self, matrix: np.ndarray, dst_size: np.ndarray) -> tuple[Any, Any, Any]:
        raise NotImplementedError

    @staticmethod
    def translate(x: float, y: float) -> np.ndarray:
        """Moves by `(x, y)` pixels."""
        return _translate(x, y)

    @staticmethod
    def scale(x: float, y: float) -> np.ndarray:
        """Scales by `x` horizontally and `y` vertically (about the origin)."""
        return _scale(x, y)

    @staticmethod
    def rotate(angle: float) -> np.ndarray:
        """Rotates by `angle` radians about the origin (clockwise on screen, y pointing down)."""
        c, s = math.cos(angle), math.sin(angle)
        return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])

    @staticmethod
    def hflip(width: float) -> np.ndarray:
        """Mirrors an image of `width` pixels left to right."""
        return np.array([[-1.0, 0.0, width], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])

    @staticmethod
    def vflip(height: float) -> np.ndarray:
        """Mirrors an image of `height` pixels top to bottom."""
        return np.array([[1.0, 0.0, 0.0], [0.0, -1.0, height], [0.0, 0.0, 1.0]])


def _dims(size: np.ndarray) -> Any:
    """A stand-in image of `size` for torchvision's `get_params` (which reads only its shape)."""
    import torch

    return torch.empty((1, int(size[1]), int(size[0])))


def _interpolation_rank(mode: Any) -> int:
    name = getattr(mode, "value", str(mode)).lower()
    return {"nearest": 0, "nearest-exact": 0, "bilinear": 1, "bicubic": 2}.get(name, 0)


class _Step:
    """One torchvision transform as a matrix step."""

    def __init__(self, transform: Any) -> None:
        self.t = transform

    def __call__(self, matrix: np.ndarray, size: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        t = self.t
        try:
            import torch
            from torchvision import transforms as T
        except ImportError:
            # Without torchvision, `t` is none of its transforms.
            raise NotImplementedError(
                f"{type(t).__name__} cannot be merged (no matrix for it)"
            ) from None

        w, h = int(size[0]), int(size[1])
        if isinstance(t, T.RandomResizedCrop):
            i, j, ch, cw = t.get_params(_dims(size), t.scale, t.ratio)
            out_h, out_w = _pair(t.size)
            step = _scale(out_w / cw, out_h / ch) @ _translate(-j, -i)
            return step @ matrix, np.array([out_w, out_h])
        if isinstance(t, T.Resize):
            new_w, new_h = _resized(w, h, t.size, t.max_size)
            return _scale(new_w / w, new_h / h) @ matrix, np.array([new_w, new_h])
        if isinstance(t, T.RandomHorizontalFlip):
            if torch.rand(1) < t.p:
                matrix = CustomTransform.hflip(w) @ matrix
            return matrix, size
        if isinstance(t, T.RandomVerticalFlip):
            if torch.rand(1) < t.p:
                matrix = CustomTransform.vflip(h) @ matrix
            return matrix, size
        if isinstance(t, T.RandomRotation):
            angle = t.get_params(t.degrees)
            center = None if t.center is None else tuple(t.center)
            inverse, out = _pil_rotation_inverse(angle, w, h, t.expand, center)
            return np.linalg.inv(inverse) @ matrix, out
        if isinstance(t, T.RandomCrop):
            if t.padding is not None:
                raise NotImplementedError("RandomCrop with padding in a MergeTransform")
            crop_h, crop_w = t.size
            if t.pad_if_needed and w < crop_w:
                pad = crop_w - w
                matrix = _translate(pad, 0) @ matrix
                w += 2 * pad
            if t.pad_if_needed and h < crop_h:
                pad = crop_h - h
                matrix = _translate(0, pad) @ matrix
                h += 2 * pad
            i, j, ch, cw = t.get_params(_dims(np.array([w, h])), t.size)
            return _translate(-j, -i) @ matrix, np.array([cw, ch])
        if isinstance(t, T.CenterCrop):
            crop_h, crop_w = _pair(t.size)
            left = top = 0
            if crop_w > w or crop_h > h:
                left = (crop_w - w) // 2 if crop_w > w else 0
                top = (crop_h - h) // 2 if crop_h > h else 0
                right = (crop_w - w + 1) // 2 if crop_w > w else 0
                bottom = (crop_h - h + 1) // 2 if crop_h > h else 0
                matrix = _translate(left, top) @ matrix
                w, h = w + left + right, h + top + bottom
            crop_top = int(round((h - crop_h) / 2.0))
            crop_left = int(round((w - crop_w) / 2.0))
            return _translate(-crop_left, -crop_top) @ matrix, np.array([crop_w, crop_h])
        if isinstance(t, T.RandomPerspective):
            if torch.rand(1) < t.p:
                from torchvision.transforms.functional import _get_perspective_coeffs

                start, end = t.get_params(w, h, t.distortion_scale)
                a, b, c, d, e, f, g, hh = _get_perspective_coeffs(start, end)
                inverse = np.array([[a, b, c], [d, e, f], [g, hh, 1.0]])
                matrix = np.linalg.inv(inverse) @ matrix
            return matrix, size
        raise NotImplementedError(f"{type(t).__name__} cannot be merged (no matrix for it)")


def _pair(size: Any) -> tuple[int, int]:
    if isinstance(size, int):
        return size, size
    if len(size) == 1:
        return size[0], size[0]
    return int(size[0]), int(size[1])


def _resized(w: int, h: int, size: Any, max_size: Any) -> tuple[int, int]:
    """torchvision's output size of `Resize(size, max_size=...)` for a `w` x `h` image."""
    if isinstance(size, int) or len(size) == 1:
        requested = size if isinstance(size, int) else size[0]
        short, long = (w, h) if w <= h else (h, w)
        new_short, new_long = requested, int(requested * long / short)
        if max_size is not None:
            if max_size <= requested:
                raise ValueError(f"max_size ({max_size}) must be larger than the size ({requested})")
            if new_long > max_size:
                new_short, new_long = int(max_size * new_short / new_long), max_size
        return (new_short, new_long) if w <= h else (new_long, new_short)
    return int(size[1]), int(size[0])


def _pil_rotation_inverse(
    angle: float, w: int, h: int, expand: bool, center: Any
) -> tuple[np.ndarray, np.ndarray]:
    """The output-to-input matrix and the output size of PIL's `Image.rotate`."""
    if center is None:
        center = (w / 2, h / 2)
    rad = -math.radians(angle % 360.0)
    m = [
        round(math.cos(rad), 15), round(math.sin(rad), 15), 0.0,
        round(-math.sin(rad), 15), round(math.cos(rad), 15), 0.0,
    ]

    def apply(x: float, y: float) -> tuple[float, float]:
        return m[0] * x + m[1] * y + m[2], m[3] * x + m[4] * y + m[5]

    m[2], m[5] = apply(-center[0], -center[1])
    m[2] += center[0]
    m[5] += center[1]
    if expand:
        xs, ys = zip(*(apply(x, y) for x, y in ((0, 0), (w, 0), (w, h), (0, h))))
        nw = math.ceil(max(xs)) - math.floor(min(xs))
        nh = math.ceil(max(ys)) - math.floor(min(ys))
        m[2], m[5] = apply(-(nw - w) / 2.0, -(nh - h) / 2.0)
        w, h = nw, nh
    inverse = np.array([[m[0], m[1], m[2]], [m[3], m[4], m[5]], [0.0, 0.0, 1.0]])
    return inverse, np.array([w, h])


class MergeTransform:
    """The transforms of the list applied as one resampling of a PIL image (see the module's
    documentation). The interpolation is the finest of the transforms' (nearest without any)."""

    def __init__(self, transforms: Sequence[Any]) -> None:
        self.transforms = list(transforms)
        ranks = [
            _interpolation_rank(t.interpolation)
            for t in self.transforms
            if getattr(t, "interpolation", None) is not None
        ]
        self._rank = max(ranks, default=0)

    def __call__(self, img: Any) -> Any:
        from PIL import Image

        if not isinstance(img, Image.Image):
            raise TypeError(f"MergeTransform transforms PIL images, not {type(img).__name__}")
        matrix = np.eye(3)
        size = np.array(img.size)
        for t in self.transforms:
            if isinstance(t, CustomTransform):
                matrix, size, _params = t.apply_transform(matrix, size)
            else:
                matrix, size = _Step(t)(matrix, size)
        out_size = (int(size[0]), int(size[1]))
        resample = [Image.NEAREST, Image.BILINEAR, Image.BICUBIC][self._rank]
        inverse = np.linalg.inv(matrix)
        if np.allclose(inverse[2], [0.0, 0.0, 1.0]):
            coeffs = tuple(float(v) for v in inverse[:2].reshape(-1))
            return img.transform(out_size, Image.AFFINE, coeffs, resample)
        inverse = inverse / inverse[2, 2]
        coeffs = tuple(float(v) for v in inverse.reshape(-1)[:8])
        return img.transform(out_size, Image.PERSPECTIVE, coeffs, resample)

    def __repr__(self) -> str:
        return f"MergeTransform({self.transforms!r})"
