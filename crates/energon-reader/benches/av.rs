//! AV decoding throughput (feature `video`): random 8-frame clips from a short H.264 video, one
//! clip per decoder call (each call opens the part's bytes afresh, as a task encoder asking a
//! sample's `AVDecoder` for a clip does), by frame number and by seconds, at the video's size and
//! resized; and the whole video (`get_frames`).
//!
//! The video is `tests/fixtures/av/h264_aac.mp4` (H.264 64x48, 25 fps, 2 s, AAC audio); with
//! `ENERGON_BENCH_VIDEO` naming another file (e.g. one of the 10 s 224p videos that
//! `crates/energon-py/benches/clips.py generate` writes), its clips are measured as well.
//! Run with `cargo bench -p energon-reader --features video --bench av`.

use std::{hint::black_box, time::Duration};

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use energon_reader::av::{AvDecoder, VideoUnit};

/// Frames of a clip.
const CLIP: u64 = 8;
/// Clips per iteration.
const CLIPS: usize = 64;

/// Fixed pseudo-random clip starts in `0..=n_frames - CLIP`.
fn starts(n_frames: u64) -> Vec<u64> {
    let mut x = 12345u64;
    (0..CLIPS)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 20) % (n_frames - CLIP + 1)
        })
        .collect()
}

fn clips(c: &mut Criterion) {
    let path = energon_fixtures::fixtures_dir().join("av/h264_aac.mp4");
    clips_of(c, &path, "av_clips");
    if let Some(other) = std::env::var_os("ENERGON_BENCH_VIDEO") {
        clips_of(c, std::path::Path::new(&other), "av_clips_other");
    }
    whole(c, &path);
}

fn clips_of(c: &mut Criterion, path: &std::path::Path, group_name: &str) {
    let data = Bytes::from(std::fs::read(path).expect("reading the test video"));
    let decoder = AvDecoder::new(data, path.display().to_string());
    let (_, frames) = decoder.video_duration(true).expect("video duration");
    let n_frames = frames.expect("frame count");
    let fps = decoder.video_fps().expect("frame rate");
    let starts = starts(n_frames);
    let mut group = c.benchmark_group(group_name);
    group.throughput(Throughput::Elements(CLIPS as u64));
    let by_frames: Vec<(f64, f64)> =
        starts.iter().map(|&s| (s as f64, (s + CLIP - 1) as f64)).collect();
    let by_seconds: Vec<(f64, f64)> =
        starts.iter().map(|&s| (s as f64 / fps, (s + CLIP) as f64 / fps)).collect();
    for (name, ranges, unit, size) in [
        ("random_8_frames", &by_frames, VideoUnit::Frames, None),
        ("random_8_frames_resized_32x24", &by_frames, VideoUnit::Frames, Some((32, 24))),
        ("random_8_frames_by_seconds", &by_seconds, VideoUnit::Seconds, None),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                for range in ranges {
                    let clip = decoder.video_clips(&[*range], unit, size).expect("clip");
                    black_box(clip);
                }
            });
        });
    }
    group.finish();
}

fn whole(c: &mut Criterion, path: &std::path::Path) {
    let data = Bytes::from(std::fs::read(path).expect("reading the test video"));
    let decoder = AvDecoder::new(data, "h264_aac.mp4");
    let mut group = c.benchmark_group("av_whole");
    group.throughput(Throughput::Elements(1));
    group.bench_function("get_frames_with_audio", |b| {
        b.iter(|| black_box(decoder.frames(true).expect("frames")));
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5)).sample_size(20);
    targets = clips
}
criterion_main!(benches);
