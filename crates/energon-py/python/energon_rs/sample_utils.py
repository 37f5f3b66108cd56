"""`format_sample_detailed`: a sample (or any value) as readable YAML-style text, for logs and
debugging.

Mappings and dataclasses become nested blocks (a dataclass under its class name), sequences
become `- ` items, scalars are written as YAML writes them (`true`, `null`, quoted when they
would read back as something else), and tensors and arrays are summarized by shape, dtype,
range and, when they have at most `max_values` elements, their values.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Optional

from .debug_log import batch_keys as default_get_batch_keys

__all__ = ["default_get_batch_keys", "format_sample_detailed"]

_PLAIN = re.compile(r"^[A-Za-z_./(<][^:#\n]*$|^[A-Za-z_./(<][^\n]*[^:\s]$")
_RESERVED = re.compile(
    r"^(?:true|false|yes|no|on|off|null|~|[-+]?(?:\d[\d_]*)?(?:\.\d*)?(?:[eE][-+]?\d+)?)$",
    re.IGNORECASE,
)


def format_sample_detailed(sample: Any, max_values: int = 16) -> str:
    """The text of `sample`; tensors and arrays list their values up to `max_values`
    elements."""
    return "\n".join(_Formatter(max_values).value_lines(sample, 0))


class _Formatter:
    def __init__(self, max_values: int) -> None:
        self.max_values = max_values

    def summary(self, value: Any) -> Optional[str]:
        """The one-line summary of a tensor or an array, `None` for other values."""
        module = type(value).__module__
        if module.startswith("torch") and hasattr(value, "shape") and hasattr(value, "device"):
            text = f"Tensor(shape={value.shape}, dtype={value.dtype}, device={value.device}"
            if value.numel() > 0 and not value.is_complex():
                text += f", min={value.min().item()}, max={value.max().item()}"
            if value.numel() <= self.max_values:
                text += f", values={value.tolist()}"
            return text + ")"
        if module == "numpy" and type(value).__name__ == "ndarray":
            text = f"np.ndarray(shape={value.shape}, dtype={value.dtype}"
            if value.size > 0 and value.dtype.kind in "biuf":
                text += f", min={value.min()}, max={value.max()}"
            if value.size <= self.max_values:
                text += f", values={list(value.flat)!r}"
            return text + ")"
        return None

    def scalar(self, value: Any, indent: int) -> Optional[str]:
        """The inline text of a scalar value, `None` for containers."""
        if value is None:
            return "null"
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (int, float)):
            return repr(value)
        if isinstance(value, str):
            return self.string(value, indent)
        if isinstance(value, (bytes, bytearray, memoryview)):
            return f"<{len(value)} bytes>"
        summary = self.summary(value)
        if summary is not None:
            return summary
        if isinstance(value, (dict, list, tuple)) or _is_dataclass(value):
            return None
        return repr(value)

    @staticmethod
    def string(value: str, indent: int) -> str:
        if "\n" not in value and _PLAIN.match(value) and not _RESERVED.match(value):
            return value
        # Single-quoted: quotes doubled, each line break written as an empty line.
        lines = value.replace("'", "''").split("\n")
        return "'" + ("\n\n" + " " * (indent + 2)).join(lines) + "'"

    def mapping_of(self, value: Any) -> Optional[dict]:
        if isinstance(value, dict):
            return value
        if _is_dataclass(value):
            fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
            return {type(value).__name__: fields}
        return None

    def value_lines(self, value: Any, indent: int) -> list[str]:
        """The lines of a top-level value."""
        text = self.scalar(value, indent)
        if text is not None:
            return [" " * indent + text]
        mapping = self.mapping_of(value)
        if mapping is not None:
            return self.map_lines(mapping, indent)
        return self.seq_lines(list(value), indent)

    def map_lines(self, mapping: dict, indent: int) -> list[str]:
        if not mapping:
            return [" " * indent + "{}"]
        pad = " " * indent
        out = []
        for key, value in mapping.items():
            text = self.scalar(value, indent)
            if text is not None:
                out.append(f"{pad}{key}: {text}")
                continue
            inner = self.mapping_of(value)
            if inner is not None:
                if inner:
                    out.append(f"{pad}{key}:")
                    out.extend(self.map_lines(inner, indent + 2))
                else:
                    out.append(f"{pad}{key}: {{}}")
            elif value:
                out.append(f"{pad}{key}:")
                out.extend(self.seq_lines(list(value), indent))
            else:
                out.append(f"{pad}{key}: []")
        return out

    def seq_lines(self, items: list, indent: int) -> list[str]:
        if not items:
            return [" " * indent + "[]"]
        pad = " " * indent
        out = []
        for item in items:
            text = self.scalar(item, indent)
            if text is not None:
                out.append(f"{pad}- {text}")
                continue
            mapping = self.mapping_of(item)
            lines = (
                self.map_lines(mapping, indent + 2)
                if mapping is not None
                else self.seq_lines(list(item), indent + 2)
            )
            out.append(f"{pad}- {lines[0][indent + 2:]}")
            out.extend(lines[1:])
        return out


def _is_dataclass(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)
