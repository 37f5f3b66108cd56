//! The skip-ahead of the frame-number reader (the `skip` module) against the reader decoding
//! every frame: the same clips, bit for bit, for every start and several lengths, alone and in
//! one request with seeks forward and backward.

use super::{skip::TEST_STATE, tests::media, *};

/// The clips of `ranges`, with the skip-ahead on or off, and how many skips it made.
fn clips(name: &str, ranges: &[(f64, f64)], skip: bool) -> (Vec<VideoClip>, usize) {
    TEST_STATE.set((skip, 0));
    let clips = media(name).video_clips(ranges, VideoUnit::Frames, None).unwrap();
    let (_, skips) = TEST_STATE.get();
    TEST_STATE.set((true, 0));
    (clips, skips)
}

#[test]
fn skipping_gives_the_clips_of_decoding_every_frame() {
    let name = "h264_aac.mp4";
    let frames = 50;
    let mut skipped = 0;
    for len in [1, 3, 8, 20] {
        for start in 0..frames {
            let range = [(start as f64, (start + len - 1) as f64)];
            let (fast, skips) = clips(name, &range, true);
            let (exact, none) = clips(name, &range, false);
            assert_eq!(none, 0);
            assert!(fast == exact, "frames {range:?} differ when skipping");
            skipped += skips;
        }
    }
    assert!(skipped > 100, "the skip-ahead was used {skipped} times only");
    // Several clips in one request: forward, backward, overlapping, past the end.
    for ranges in [
        vec![(30.0, 37.0), (5.0, 12.0), (40.0, 49.0), (13.0, 13.0)],
        vec![(0.0, 7.0), (20.0, 27.0), (21.0, 28.0), (47.0, 60.0), (10.0, 17.0)],
        vec![(44.0, f64::INFINITY), (2.0, 9.0), (35.0, 42.0)],
    ] {
        let (fast, _) = clips(name, &ranges, true);
        let (exact, _) = clips(name, &ranges, false);
        assert!(fast == exact, "clips {ranges:?} differ when skipping");
    }
}
