//! AV decoder tests against the reference's recorded results on the media of
//! `tests/fixtures/av/` (written by `tests/fixtures/tools/record_av.py`).

use serde_json::Value;

use super::*;

/// Largest per-frame channel mean difference (0..255) accepted against the reference (the
/// recording rounds means to 4 decimals; pixels must be equal).
const MEAN_TOLERANCE: f64 = 1e-3;
/// Largest audio sample difference accepted.
const AUDIO_TOLERANCE: f64 = 1e-3;

pub(crate) fn media(name: &str) -> AvDecoder {
    let path = energon_fixtures::fixtures_dir().join("av").join(name);
    AvDecoder::new(Bytes::from(std::fs::read(&path).unwrap()), name)
}

fn expected() -> Value {
    let path = energon_fixtures::fixtures_dir().join("av/expected.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn num(v: &Value) -> f64 {
    match v {
        Value::String(s) if s == "inf" => f64::INFINITY,
        v => v.as_f64().unwrap(),
    }
}

fn ranges(v: &Value) -> Vec<(f64, f64)> {
    v.as_array().unwrap().iter().map(|r| (num(&r[0]), num(&r[1]))).collect()
}

fn b64(s: &str) -> Vec<u8> {
    let table = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes().filter(|&c| c != b'=') {
        acc = (acc << 6) | table.iter().position(|&t| t == c).unwrap() as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

/// Every 4th row and column of frame `i`, `(channels, h/4, w/4)` as the recording samples it.
fn sample(clip: &VideoClip, i: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let frame = &clip.data[i * clip.height * clip.width * 3..];
    for c in 0..3 {
        for y in (0..clip.height).step_by(4) {
            for x in (0..clip.width).step_by(4) {
                out.push(frame[(y * clip.width + x) * 3 + c]);
            }
        }
    }
    out
}

#[derive(Default)]
struct Report {
    failures: Vec<String>,
    max_pixel: u8,
    max_mean: f64,
    max_audio: f64,
}

impl Report {
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.failures.push(what());
        }
    }

    fn video(&mut self, at: &str, got: &[VideoClip], want: &Value) {
        let want = want.as_array().unwrap();
        self.check(got.len() == want.len(), || {
            format!("{at}: {} clips, reference {}", got.len(), want.len())
        });
        for (k, (g, w)) in got.iter().zip(want).enumerate() {
            let shape: Vec<usize> = w["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap() as usize)
                .collect();
            self.check(g.shape().to_vec() == shape, || {
                format!("{at} clip {k}: shape {:?}, reference {shape:?}", g.shape())
            });
            let ts = (num(&w["timestamps"][0]), num(&w["timestamps"][1]));
            self.check(g.timestamps == ts, || {
                format!("{at} clip {k}: timestamps {:?}, reference {ts:?}", g.timestamps)
            });
            if g.shape().to_vec() != shape {
                continue;
            }
            for (i, means) in w["means"].as_array().unwrap().iter().enumerate() {
                let frame = &g.data[i * g.height * g.width * 3..(i + 1) * g.height * g.width * 3];
                for c in 0..3 {
                    let m = frame.iter().skip(c).step_by(3).map(|&v| f64::from(v)).sum::<f64>()
                        / (g.height * g.width) as f64;
                    self.max_mean = self.max_mean.max((m - num(&means[c])).abs());
                }
            }
            for (key, i) in [("first", 0), ("last", g.frames - 1)] {
                let want = b64(w[key].as_str().unwrap());
                let got = sample(g, i);
                for (a, b) in got.iter().zip(&want) {
                    self.max_pixel = self.max_pixel.max(a.abs_diff(*b));
                }
            }
        }
    }

    fn audio(&mut self, at: &str, got: &[AudioClip], want: &Value) {
        let want = want.as_array().unwrap();
        self.check(got.len() == want.len(), || {
            format!("{at}: {} clips, reference {}", got.len(), want.len())
        });
        for (k, (g, w)) in got.iter().zip(want).enumerate() {
            let shape = [
                w["shape"][0].as_u64().unwrap() as usize,
                w["shape"][1].as_u64().unwrap() as usize,
            ];
            self.check([g.channels, g.samples] == shape, || {
                format!("{at} clip {k}: shape {:?}, reference {shape:?}", [g.channels, g.samples])
            });
            let ts = (num(&w["timestamps"][0]), num(&w["timestamps"][1]));
            self.check(g.timestamps == ts, || {
                format!("{at} clip {k}: timestamps {:?}, reference {ts:?}", g.timestamps)
            });
            self.check(g.data.dtype() == w["dtype"], || {
                format!("{at} clip {k}: dtype {}, reference {}", g.data.dtype(), w["dtype"])
            });
            // Unscaled values: the first 16 of the first channel, the last 16 of the last.
            let n = g.samples;
            let last = (g.channels.max(1) - 1) * n;
            let tail = w["tail"].as_array().unwrap();
            let heads = w["head"].as_array().unwrap().iter().enumerate();
            let tails = tail.iter().enumerate().map(|(i, h)| (last + n - tail.len() + i, h));
            for (i, h) in heads.chain(tails) {
                if let Some(v) = g.data.get_f64(i) {
                    self.max_audio = self.max_audio.max((v - num(h)).abs());
                }
            }
        }
    }
}

fn opt_f64(v: &Value) -> Option<f64> {
    v.as_f64()
}

#[test]
fn matches_the_reference_recording() {
    let exp = expected();
    let mut r = Report::default();
    for (name, rec) in exp["files"].as_object().unwrap() {
        let d = media(name);
        r.check(d.extension() == rec["extension"].as_str(), || {
            format!("{name}: extension {:?}", d.extension())
        });
        let mode = match d.index_mode() {
            IndexMode::Frames => "frames",
            IndexMode::Pts => "pts",
            IndexMode::Probe => "probe",
        };
        r.check(mode == rec["index_mode"], || format!("{name}: index mode {mode}"));
        let m =
            d.metadata(MetadataRequest { audio_num_samples: true, ..Default::default() }).unwrap();
        let em = &rec["metadata"];
        let got = [
            ("video_duration", m.video_duration),
            ("video_fps", m.video_fps),
            ("video_num_frames", m.video_num_frames.map(|x| x as f64)),
            ("video_width", m.video_width.map(f64::from)),
            ("video_height", m.video_height.map(f64::from)),
            ("audio_duration", m.audio_duration),
            ("audio_channels", m.audio_channels.map(f64::from)),
            ("audio_sample_rate", m.audio_sample_rate.map(f64::from)),
            ("audio_num_samples", m.audio_num_samples.map(|x| x as f64)),
        ];
        for (key, v) in got {
            r.check(v == opt_f64(&em[key]), || {
                format!("{name}: metadata {key} {v:?}, reference {}", em[key])
            });
        }
        r.check(d.has_video_stream().unwrap() == rec["has_video"], || format!("{name}: has_video"));
        r.check(d.has_audio_stream().unwrap() == rec["has_audio"], || format!("{name}: has_audio"));
        if rec["has_video"] == true {
            r.check(d.video_fps().ok() == opt_f64(&rec["fps"]), || format!("{name}: fps"));
            let (dur, n) = d.video_duration(true).unwrap();
            r.check(
                dur == opt_f64(&rec["video_duration"][0]) && n == rec["video_duration"][1].as_u64(),
                || format!("{name}: video_duration(True) {dur:?} {n:?}"),
            );
            let (dur, n) = d.video_duration(false).unwrap();
            r.check(
                dur == opt_f64(&rec["video_duration_no_count"][0])
                    && n == rec["video_duration_no_count"][1].as_u64(),
                || format!("{name}: video_duration() {dur:?} {n:?}"),
            );
        }
        if rec["has_audio"] == true {
            r.check(
                d.audio_samples_per_second().ok().map(f64::from) == opt_f64(&rec["audio_rate"]),
                || format!("{name}: audio rate"),
            );
            let dur = d.audio_duration().unwrap();
            r.check(dur == opt_f64(&rec["audio_duration"]), || {
                format!("{name}: audio_duration {dur:?}, reference {}", rec["audio_duration"])
            });
        }
        let frames = d.frames(true);
        if rec["frames_error"].is_string() {
            // An audio-only WebM, taken for a video by its extension: an error in both.
            r.check(frames.is_err(), || format!("{name}: get_frames {frames:?}, reference fails"));
        } else {
            r.check(frames.as_ref().is_ok_and(|f| f.is_some() != rec["frames"].is_null()), || {
                format!("{name}: get_frames {:?}", frames.as_ref().err())
            });
        }
        if let Ok(Some(f)) = frames {
            r.video(&format!("{name} get_frames"), &f.video_clips, &rec["frames"]["video"]);
            r.audio(&format!("{name} get_frames"), &f.audio_clips, &rec["frames"]["audio"]);
        }
        for q in rec["video_requests"].as_array().unwrap() {
            let unit = if q["unit"] == "frames" { VideoUnit::Frames } else { VideoUnit::Seconds };
            let size = q["size"]
                .as_array()
                .map(|s| (s[0].as_u64().unwrap() as usize, s[1].as_u64().unwrap() as usize));
            let at = format!("{name} video {} {}", q["unit"], q["ranges"]);
            let got = d.video_clips(&ranges(&q["ranges"]), unit, size);
            r.check(got.is_ok(), || format!("{at}: {got:?}"));
            let got = got.unwrap_or_default();
            r.video(&format!("{name} video {} {}", q["unit"], q["ranges"]), &got, &q["clips"]);
        }
        for q in rec["audio_requests"].as_array().unwrap() {
            let unit = if q["unit"] == "samples" { AudioUnit::Samples } else { AudioUnit::Seconds };
            let at = format!("{name} audio {} {}", q["unit"], q["ranges"]);
            let got = d.audio_clips(&ranges(&q["ranges"]), unit);
            r.check(got.is_ok(), || format!("{at}: {got:?}"));
            let got = got.unwrap_or_default();
            r.audio(&format!("{name} audio {} {}", q["unit"], q["ranges"]), &got, &q["clips"]);
        }
    }
    eprintln!(
        "largest differences: pixel {}, frame channel mean {:.4}, audio sample {:.2e}",
        r.max_pixel, r.max_mean, r.max_audio
    );
    assert!(r.failures.is_empty(), "{} mismatches:\n{}", r.failures.len(), r.failures.join("\n"));
    assert!(r.max_pixel == 0 && r.max_mean <= MEAN_TOLERANCE && r.max_audio <= AUDIO_TOLERANCE);
}

#[test]
fn a_clip_after_one_to_the_end_is_empty_as_in_the_reference() {
    // COMPAT(energon 7.4.1): av_reader.py:AVReaderByPts.seek_read — the decode generator is
    // exhausted by a clip that runs to the end and stays so after seeks: later clips are
    // dropped (checked against the reference on these files).
    for name in ["vp9_opus.webm", "h264_aac.mp4", "mpeg4_mp3.avi"] {
        let clips = media(name)
            .video_clips(&[(0.0, f64::INFINITY), (0.0, 5.0)], VideoUnit::Frames, None)
            .unwrap();
        assert_eq!(clips.len(), 1, "{name}");
        assert_eq!(clips[0].frames, 50, "{name}");
    }
}

#[test]
fn bad_media_is_an_error_naming_it() {
    let d = AvDecoder::new(
        Bytes::from_static(b"RIFF\0\0\0\0AVI not really a video"),
        "ds shard-0.tar key 7 .avi",
    );
    let e = d.video_clips(&[(0.0, 1.0)], VideoUnit::Frames, None).unwrap_err();
    assert_eq!(e.origin, "ds shard-0.tar key 7 .avi");
    assert!(e.to_string().contains("key 7"), "{e}");
    let data = std::fs::read(energon_fixtures::fixtures_dir().join("av/h264_aac.mp4")).unwrap();
    for cut in [0, 100, data.len() / 2] {
        let d = AvDecoder::new(Bytes::from(data[..cut].to_vec()), "cut");
        // Truncated media decodes what it can or fails; it never panics.
        let _ = d.video_clips(&[(0.0, 100.0)], VideoUnit::Frames, None);
        let _ = d.metadata(MetadataRequest::default());
    }
    assert!(media("tone.wav").video_clips(&[(0.0, 1.0)], VideoUnit::Frames, None).is_err());
}

#[test]
fn cut_or_corrupt_audio_is_an_error_not_a_shorter_clip() {
    let bytes =
        |name: &str| std::fs::read(energon_fixtures::fixtures_dir().join("av").join(name)).unwrap();
    // The whole files decode, as long as their headers say.
    for name in ["tone.wav", "tone.flac", "tone.mp3"] {
        let audio = media(name).audio().unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(audio.audio_clips.len(), 1, "{name}");
    }
    // Cut to half: WAV and FLAC declare their length exactly; the MP3's Xing frame count too.
    for name in ["tone.wav", "tone.flac", "tone.mp3"] {
        let data = bytes(name);
        let d = AvDecoder::new(Bytes::from(data[..data.len() / 2].to_vec()), name);
        let e = d.audio().unwrap_err().to_string();
        // (A partial last sample frame is itself a decode error.)
        assert!(e.contains("corrupt audio") || e.contains("cannot decode"), "{name}: {e}");
    }
    // A flipped byte inside a FLAC frame fails its checksum.
    let mut flac = bytes("tone.flac");
    let at = flac.len() * 2 / 3;
    flac[at] ^= 0x55;
    let e = AvDecoder::new(Bytes::from(flac), "tone.flac").audio().unwrap_err();
    assert!(e.to_string().contains("cannot decode") || e.to_string().contains("corrupt"), "{e}");
}
