"""Video clip throughput from Python: random 8-frame clips from 10 s 224p H.264 videos, asked of
each sample's `AVDecoder` by a task encoder's `encode_sample`, with `get_train_dataset` and
`get_loader` (2 workers by default). The same task encoder runs on energon_rs and on the
reference (megatron-energon): only the import differs. scripts/bench-clips.sh runs both, several
times, under a peak-memory sampler.

    python clips.py generate DIR [--videos 32 --seconds 10 --fps 25 --size 398x224 --gop 50]
                                 [--encoder ffmpeg|pyav]
    python clips.py run DIR --impl energon_rs|reference [--clips 1000 --num-workers 2]

`generate` encodes the videos with the ffmpeg command-line tool (libx264 preset medium, yuv420p,
one thread, AAC audio, MP4 with faststart; FFmpeg's `testsrc2` animated test pattern with temporal
noise, so that it does not compress to nothing, seeded per video, and a `sine` tone), or, where
`ffmpeg` is not on PATH, with PyAV (`import av`), which runs the same lavfi sources and filters
(`av.filter.Graph`) into the same encoders with the same settings (`--encoder` picks one).
Either way the output is deterministic for a given FFmpeg/x264 build. It writes the videos into
WebDataset shards (`KEY.mp4` and `KEY.txt`) and prepares the dataset (with energon_rs, unless
`--impl reference`) as a `VidQASample` dataset (video: mp4, context: txt). `run` prints one JSON line: clips/s
(from the first clip on, and overall), and the CPU time per clip of the process tree (which a
busy machine does not change as much as the rate).
"""

from __future__ import annotations

import argparse
import io
import json
import random
import shutil
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

CLIP = 8


def lavfi_sources(i: int, w: int, h: int, fps: int, seconds: int) -> tuple[str, str]:
    """The video and audio lavfi sources of video `i`: each video has its own noise seed and tone."""
    video = (
        f"testsrc2=size={w}x{h}:rate={fps}:duration={seconds},"
        f"noise=alls=8:allf=t+u:all_seed={i + 1}"
    )
    audio = f"sine=frequency={220 + 10 * i}:sample_rate=44100:duration={seconds}"
    return video, audio


def encode(encoder: str, out: Path, i: int, w: int, h: int, fps: int, seconds: int, gop: int) -> None:
    video, audio = lavfi_sources(i, w, h, fps, seconds)
    if encoder == "ffmpeg":
        subprocess.run(
            [
                "ffmpeg", "-v", "error", "-y",
                "-f", "lavfi", "-i", video,
                "-f", "lavfi", "-i", audio,
                "-c:v", "libx264", "-preset", "medium", "-pix_fmt", "yuv420p",
                "-g", str(gop), "-threads", "1",
                "-c:a", "aac", "-b:a", "64k",
                "-shortest", "-movflags", "+faststart", str(out),
            ],
            check=True,
        )  # fmt: skip
    else:
        encode_pyav(out, video, audio, w, h, fps, gop)


def lavfi_graph(chain: str, sink: str, pix_fmt: str | None = None):
    """A PyAV filter graph of a lavfi source chain ("src=opts,filter=opts,...") into `sink`."""
    import av.filter

    graph = av.filter.Graph()
    nodes = [graph.add(*(f.split("=", 1) + [""])[:2]) for f in chain.split(",")]
    if pix_fmt:
        # What the CLI's `-pix_fmt` inserts at the end of the graph.
        nodes.append(graph.add("format", f"pix_fmts={pix_fmt}"))
    nodes.append(graph.add(sink))
    for a, b in zip(nodes, nodes[1:]):
        a.link_to(b)
    graph.configure()
    return graph


def pull_all(graph):
    import av

    while True:
        try:
            yield graph.pull()
        except av.EOFError:
            return


def encode_pyav(out: Path, video: str, audio: str, w: int, h: int, fps: int, gop: int) -> None:
    """The CLI command's encoding with PyAV: libx264 (CRF 23, x264's default, as the CLI), preset
    medium, yuv420p, keyframe interval `gop`, one thread; AAC 64 kb/s mono 44.1 kHz; faststart.
    Frames are pulled from the lavfi graphs in order and encoded on one thread: deterministic."""
    import av

    with av.open(str(out), "w", format="mp4", options={"movflags": "+faststart"}) as container:
        vs = container.add_stream("libx264", rate=fps, options={"preset": "medium"})
        vc = vs.codec_context
        vc.width, vc.height, vc.pix_fmt, vc.bit_rate = w, h, "yuv420p", 0
        vc.gop_size = gop
        vc.thread_count = 1
        aus = container.add_stream("aac", rate=44100)
        ac = aus.codec_context
        ac.layout, ac.bit_rate = "mono", 64000
        # The audio first, muxed along with the video by time, so that the file is interleaved
        # as the CLI's is.
        audio_packets = [p for f in pull_all(lavfi_graph(audio, "abuffersink")) for p in aus.encode(f)]
        audio_packets += aus.encode(None)
        audio_packets.reverse()

        def mux_video(packets) -> None:
            for packet in packets:
                t = packet.dts * packet.time_base
                while audio_packets and audio_packets[-1].dts * audio_packets[-1].time_base <= t:
                    container.mux(audio_packets.pop())
                container.mux(packet)

        for frame in pull_all(lavfi_graph(video, "buffersink", "yuv420p")):
            # testsrc2 marks every frame as an I-frame, which libx264 would obey (all keyframes);
            # the CLI clears the type, and so does this (AV_PICTURE_TYPE_NONE).
            frame.pict_type = 0
            mux_video(vs.encode(frame))
        mux_video(vs.encode(None))
        container.mux(audio_packets[::-1])


def generate(args) -> int:
    if args.encoder is None:
        args.encoder = "ffmpeg" if shutil.which("ffmpeg") else "pyav"
    root = Path(args.dir)
    (root / "parts").mkdir(parents=True, exist_ok=True)
    w, h = (int(v) for v in args.size.split("x"))
    shards = []
    per_shard = max(1, args.videos // args.shards)
    with tempfile.TemporaryDirectory() as tmp:
        for shard in range(args.shards):
            name = f"parts/clips-{shard:03d}.tar"
            with tarfile.open(root / name, "w") as tar:
                for i in range(shard * per_shard, min(args.videos, (shard + 1) * per_shard)):
                    out = Path(tmp) / f"{i}.mp4"
                    encode(args.encoder, out, i, w, h, args.fps, args.seconds, args.gop)
                    for ext, data in (("mp4", out.read_bytes()), ("txt", f"video {i}".encode())):
                        info = tarfile.TarInfo(f"{i:06d}.{ext}")
                        info.size = len(data)
                        tar.addfile(info, io.BytesIO(data))
            shards.append(name)
    if args.impl == "reference":
        from megatron.energon.flavors import BaseWebdatasetFactory
    else:
        from energon_rs.prepare import BaseWebdatasetFactory

    BaseWebdatasetFactory.prepare_dataset(
        root, shards, split_parts_ratio=[("train", 1.0)], shuffle_seed=None
    )
    (root / ".nv-meta" / "dataset.yaml").write_text(
        "sample_type:\n  __module__: megatron.energon\n  __class__: VidQASample\n"
        "field_map:\n  video: mp4\n  context: txt\n"
    )
    frames = args.fps * args.seconds
    if args.encoder == "pyav":
        import av

        encoder = f"PyAV {av.__version__} (libavcodec {'.'.join(map(str, av.library_versions['libavcodec']))})"
    else:
        encoder = "ffmpeg " + subprocess.run(
            ["ffmpeg", "-version"], capture_output=True, text=True, check=True
        ).stdout.split()[2]
    meta = {"frames": frames, "size": [w, h], "fps": args.fps, "encoder": encoder}
    (root / "bench.json").write_text(json.dumps(meta))
    print(f"{args.videos} videos, {frames} frames each, {w}x{h}, in {len(shards)} shards, by {encoder}: {root}")
    return 0


def tree_cpu_s() -> float:
    """CPU seconds (user and system) of this process and its live child processes (the
    reference's worker processes): the work per clip, whatever else the machine runs."""
    import psutil

    procs = [psutil.Process()]
    procs += procs[0].children(recursive=True)
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def run(args) -> int:
    # Both hand out torch tensors; the reference imports torch with the package, energon_rs on
    # the first clip: imported here, it is not timed on either side.
    import torch  # noqa: F401

    if args.impl == "reference":
        from megatron.energon import DefaultTaskEncoder, WorkerConfig, get_loader, get_train_dataset
    else:
        from energon_rs import DefaultTaskEncoder, WorkerConfig, get_loader, get_train_dataset

    frames = json.loads((Path(args.dir) / "bench.json").read_text())["frames"]

    class ClipEncoder(DefaultTaskEncoder):
        """One random 8-frame clip per sample, by frame number."""

        def __init__(self):
            super().__init__()
            self.rng = random.Random(args.seed)

        def encode_sample(self, sample):
            start = self.rng.randrange(frames - CLIP + 1)
            av = sample.video.get_clips(video_clip_ranges=[(start, start + CLIP - 1)], video_unit="frames")
            (clip,) = av.video_clips
            assert tuple(clip.shape[:2]) == (CLIP, 3), clip.shape
            sample.video = clip
            return sample

    wc = WorkerConfig(rank=0, world_size=1, num_workers=args.num_workers)
    ds = get_train_dataset(
        args.dir,
        worker_config=wc,
        batch_size=None,
        shuffle_buffer_size=None,
        max_samples_per_sequence=None,
        task_encoder=ClipEncoder(),
    )
    loader = get_loader(ds)
    cpu_start = tree_cpu_s()
    t_start = time.perf_counter()
    it = iter(loader)
    first = next(it)
    t_first = time.perf_counter()
    n = 1
    checksum = int(first.video.sum())
    while n < args.clips:
        checksum += int(next(it).video[0, 0, 0, 0])
        n += 1
    t_end = time.perf_counter()
    cpu = tree_cpu_s() - cpu_start
    print(
        json.dumps(
            dict(
                bench="clips",
                impl=args.impl,
                num_workers=args.num_workers,
                clips=n,
                clip_shape=list(first.video.shape),
                first_clip_s=round(t_first - t_start, 3),
                steady_clips_per_s=round((n - 1) / (t_end - t_first), 1),
                overall_clips_per_s=round(n / (t_end - t_start), 1),
                cpu_ms_per_clip=round(cpu / n * 1000, 2),
            )
        ),
        flush=True,
    )
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate", help="encode the videos and prepare the dataset")
    g.add_argument("dir")
    g.add_argument("--videos", type=int, default=32)
    g.add_argument("--shards", type=int, default=4)
    g.add_argument("--seconds", type=int, default=10)
    g.add_argument("--fps", type=int, default=25)
    g.add_argument("--size", default="398x224", help="WIDTHxHEIGHT")
    g.add_argument("--gop", type=int, default=50, help="keyframe interval in frames")
    g.add_argument("--impl", choices=["energon_rs", "reference"], default="energon_rs", help="which prepares it")
    g.add_argument(
        "--encoder",
        choices=["ffmpeg", "pyav"],
        help="the ffmpeg command-line tool, or PyAV (default: ffmpeg where it is on PATH)",
    )
    r = sub.add_parser("run", help="measure clips/s")
    r.add_argument("dir")
    r.add_argument("--impl", choices=["energon_rs", "reference"], required=True)
    r.add_argument("--clips", type=int, default=1000)
    r.add_argument("--num-workers", type=int, default=2)
    r.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    return generate(args) if args.cmd == "generate" else run(args)


if __name__ == "__main__":
    raise SystemExit(main())
