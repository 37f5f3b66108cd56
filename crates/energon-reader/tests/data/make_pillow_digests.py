"""Writes Pillow's decoded pixels of test JPEGs as digests, for the `turbojpeg` golden test.

Run with the Python that has the Pillow version below (the reference's environment):

    python crates/energon-reader/tests/data/make_pillow_digests.py

It (re)writes, next to this script:
  * jpeg/*.jpg: small JPEGs covering what the fixture's 4:2:0 images do not (grayscale, 4:4:4,
    4:2:2, odd sizes, progressive, restart markers, CMYK with and without an Adobe marker, corrupt
    and truncated data, a bad Huffman table), encoded by Pillow from deterministic patterns;
  * pillow_jpeg_digests.txt: for every JPEG member of the fixture shards and every file in jpeg/,
    the size and the sha256 of Pillow's `convert("RGB")`, `convert("L")` and `convert("RGBA")`
    bytes after `Image.open(...).load()` (what the reference's decoder does), or `error` when
    Pillow refuses the file.

The expected versions are asserted: other versions may decode differently, so a change of version
is a deliberate edit here.
"""

import hashlib
import io
import sys
import tarfile
from pathlib import Path

import PIL
from PIL import Image, features

PILLOW_VERSION = "13.0.0"
LIBJPEG_TURBO_VERSION = "3.2.0"

HERE = Path(__file__).resolve().parent
SHARDS = HERE.parents[3] / "tests" / "fixtures" / "energon-ref-small" / "shards"
OUT_DIR = HERE / "jpeg"
DIGESTS = HERE / "pillow_jpeg_digests.txt"


def pattern(width, height, channels, seed):
    """Smooth gradients with a little deterministic noise (so chroma upsampling matters)."""
    state = seed
    out = bytearray()
    for y in range(height):
        for x in range(width):
            for c in range(channels):
                state = (state * 1103515245 + 12345) & 0x7FFFFFFF
                noise = (state >> 16) % 48
                base = (x * (5 + 3 * c) + y * (9 - 2 * c) + 40 * c) % 208
                out.append(base + noise)
    return bytes(out)


def encode(mode, size, seed, **options):
    channels = Image.getmodebands(mode)
    img = Image.frombytes(mode, size, pattern(size[0], size[1], channels, seed))
    buf = io.BytesIO()
    img.save(buf, "JPEG", **options)
    return buf.getvalue()


def without_segment(data, marker):
    """`data` without its first marker segment `marker` (e.g. 0xEE for the Adobe APP14)."""
    at = data.index(bytes([0xFF, marker]))
    length = int.from_bytes(data[at + 2 : at + 4], "big")
    return data[:at] + data[at + 2 + length :]


def scan_start(data):
    """Offset of the first byte after the first SOS segment."""
    at = data.index(b"\xff\xda")
    return at + 2 + int.from_bytes(data[at + 2 : at + 4], "big")


def synthetic():
    """(name, bytes) of the extra test JPEGs."""
    base = encode("RGB", (37, 23), 1, quality=85)
    body = scan_start(base)
    middle = (body + len(base)) // 2
    corrupt = bytearray(base)
    for i in range(body + 10, len(base) - 2, 29):
        if corrupt[i] not in (0x00, 0xFF) and corrupt[i - 1] != 0xFF:
            corrupt[i] ^= 0x5A
    cmyk = encode("CMYK", (27, 21), 7, quality=90)
    bad_table = bytearray(base)
    dht = bad_table.index(b"\xff\xc4")
    bad_table[dht + 5 : dht + 21] = b"\xff" * 16  # code counts that overflow the table
    return [
        ("gray_33x17.jpg", encode("L", (33, 17), 2, quality=90)),
        ("rgb444_40x24.jpg", encode("RGB", (40, 24), 3, quality=95, subsampling=0)),
        ("rgb422_35x19.jpg", encode("RGB", (35, 19), 4, quality=80, subsampling=1)),
        ("rgb420_37x23.jpg", base),
        ("rgb420_1x1.jpg", encode("RGB", (1, 1), 5, quality=75)),
        ("progressive_45x31.jpg", encode("RGB", (45, 31), 6, quality=80, progressive=True)),
        ("restart_48x40.jpg", encode("RGB", (48, 40), 8, quality=80, restart_marker_blocks=2)),
        ("cmyk_27x21.jpg", cmyk),
        ("cmyk_no_adobe_27x21.jpg", without_segment(cmyk, 0xEE)),
        ("corrupt_37x23.jpg", bytes(corrupt)),
        ("cut_with_eoi_37x23.jpg", base[:middle] + b"\xff\xd9"),
        ("extraneous_37x23.jpg", base[:-2] + b"\x12\x34\x56\xff\xd9"),
        ("trailing_37x23.jpg", base + b"not part of the image"),
        ("truncated_37x23.jpg", base[:middle]),
        ("no_eoi_37x23.jpg", base[:-2]),
        ("bad_huffman_table_37x23.jpg", bytes(bad_table)),
    ]


def digest_line(name, data):
    try:
        img = Image.open(io.BytesIO(data))
        img.load()
        rgb = img.convert("RGB").tobytes()
        luma = img.convert("L").tobytes()
        rgba = img.convert("RGBA").tobytes()
    except OSError:
        return f"{name} error"
    sha = lambda b: hashlib.sha256(b).hexdigest()  # noqa: E731
    width, height = img.size
    return f"{name} {width}x{height} rgb={sha(rgb)} l={sha(luma)} rgba={sha(rgba)}"


def main():
    turbo = features.version("libjpeg_turbo")
    if PIL.__version__ != PILLOW_VERSION or turbo != LIBJPEG_TURBO_VERSION:
        sys.exit(
            f"expected Pillow {PILLOW_VERSION} with libjpeg-turbo {LIBJPEG_TURBO_VERSION}, "
            f"found Pillow {PIL.__version__} with libjpeg-turbo {turbo}"
        )
    lines = [
        "# Pillow's pixels of test JPEGs: sha256 of convert(\"RGB\"), convert(\"L\") and",
        "# convert(\"RGBA\") bytes, or `error` when Pillow refuses the file.",
        f"# Written by make_pillow_digests.py with Pillow {PILLOW_VERSION}, "
        f"libjpeg-turbo {LIBJPEG_TURBO_VERSION}.",
    ]
    shards = sorted(SHARDS.glob("*.tar"))
    if not shards:
        sys.exit(f"no fixture shards in {SHARDS}")
    for shard in shards:
        with tarfile.open(shard) as tar:
            for member in tar.getmembers():
                if member.isfile() and member.name.lower().endswith((".jpg", ".jpeg")):
                    data = tar.extractfile(member).read()
                    lines.append(digest_line(f"{shard.name}/{member.name}", data))
    OUT_DIR.mkdir(exist_ok=True)
    for name, data in synthetic():
        (OUT_DIR / name).write_bytes(data)
        lines.append(digest_line(f"jpeg/{name}", data))
    DIGESTS.write_text("\n".join(lines) + "\n")
    print(f"wrote {len(lines) - 3} digests to {DIGESTS}")


if __name__ == "__main__":
    main()
