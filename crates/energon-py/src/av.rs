//! `energon_rs._native.AvDecoder`: the Rust AV decoder over a part's bytes; `energon_rs.av`
//! wraps it with the reference's `AVDecoder` methods. Arrays move into numpy without a copy.

use bytes::Bytes;
use energon_reader::av::{
    AudioClip, AudioUnit, AvDecoder, AvError, IndexMode, MetadataRequest, VideoClip, VideoUnit,
};
use energon_reader::decode::Tensor;
use numpy::{PyArray1, PyArrayMethods};
use pyo3::{exceptions::PyValueError, prelude::*, types::PyDict};

fn err(e: AvError) -> PyErr {
    PyValueError::new_err(e.to_string())
}

type Clips<'py> = (Vec<Bound<'py, PyAny>>, Vec<(f64, f64)>);

/// A decoder over one media part.
#[derive(Debug)]
#[pyclass(name = "AvDecoder", module = "energon_rs._native", frozen)]
pub struct PyAvDecoder {
    inner: AvDecoder,
}

fn video_unit(unit: &str) -> PyResult<VideoUnit> {
    match unit {
        "frames" => Ok(VideoUnit::Frames),
        "seconds" => Ok(VideoUnit::Seconds),
        other => Err(PyValueError::new_err(format!(
            "video_unit must be 'frames' or 'seconds', not {other:?}"
        ))),
    }
}

fn audio_unit(unit: &str) -> PyResult<AudioUnit> {
    match unit {
        "samples" => Ok(AudioUnit::Samples),
        "seconds" => Ok(AudioUnit::Seconds),
        other => Err(PyValueError::new_err(format!(
            "audio_unit must be 'samples' or 'seconds', not {other:?}"
        ))),
    }
}

impl PyAvDecoder {
    /// A decoder over a part's bytes (no copy); `origin` names the part in errors.
    pub(crate) fn over(data: Bytes, origin: String) -> Self {
        PyAvDecoder { inner: AvDecoder::new(data, origin) }
    }
}

/// Video clips as `(frames, height, width, 3)` uint8 arrays (owning the Rust buffers), and
/// their timestamps.
pub(crate) fn video_arrays(py: Python<'_>, clips: Vec<VideoClip>) -> PyResult<Clips<'_>> {
    let mut arrays = Vec::with_capacity(clips.len());
    let mut stamps = Vec::with_capacity(clips.len());
    for c in clips {
        let shape = [c.frames, c.height, c.width, 3];
        arrays.push(PyArray1::from_vec(py, c.data).reshape(shape)?.into_any());
        stamps.push(c.timestamps);
    }
    Ok((arrays, stamps))
}

/// Audio clips as `(channels, samples)` arrays of the decoder's sample type (int16 for 16-bit
/// PCM and FLAC, float32 for MP3, AAC, Opus, ...), and their timestamps.
pub(crate) fn audio_arrays(py: Python<'_>, clips: Vec<AudioClip>) -> PyResult<Clips<'_>> {
    let mut arrays = Vec::with_capacity(clips.len());
    let mut stamps = Vec::with_capacity(clips.len());
    for c in clips {
        let tensor = Tensor { shape: vec![c.channels, c.samples], data: c.data };
        arrays.push(crate::convert::numpy_array(py, tensor)?);
        stamps.push(c.timestamps);
    }
    Ok((arrays, stamps))
}

#[pymethods]
impl PyAvDecoder {
    /// A decoder over `data`; `origin` names the part in errors.
    #[new]
    #[pyo3(signature = (data, origin = String::new()))]
    fn new(data: Vec<u8>, origin: String) -> Self {
        PyAvDecoder { inner: AvDecoder::new(Bytes::from(data), origin) }
    }

    /// The media bytes, as a read-only `memoryview` (no copy).
    fn data<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::buffer::Buffer::memoryview(py, self.inner.data().clone())
    }

    /// What names the media in errors (dataset, shard, key and part, for a part the loader read).
    fn origin(&self) -> &str {
        self.inner.origin()
    }

    /// The file type the content gives (`mp4`, `mkv`, `wav`, ...), or None.
    fn extension(&self) -> Option<&'static str> {
        self.inner.extension()
    }

    /// `frames`, `pts` or `probe`.
    fn index_mode(&self) -> &'static str {
        match self.inner.index_mode() {
            IndexMode::Frames => "frames",
            IndexMode::Pts => "pts",
            IndexMode::Probe => "probe",
        }
    }

    /// Video clips as `(frames, height, width, 3)` uint8 arrays, and their timestamps.
    #[pyo3(signature = (ranges, unit, out_size = None))]
    fn video_clips<'py>(
        &self,
        py: Python<'py>,
        ranges: Vec<(f64, f64)>,
        unit: &str,
        out_size: Option<(usize, usize)>,
    ) -> PyResult<Clips<'py>> {
        let unit = video_unit(unit)?;
        let clips = py.detach(|| self.inner.video_clips(&ranges, unit, out_size)).map_err(err)?;
        video_arrays(py, clips)
    }

    /// Audio clips as `(channels, samples)` float32 arrays, and their timestamps.
    fn audio_clips<'py>(
        &self,
        py: Python<'py>,
        ranges: Vec<(f64, f64)>,
        unit: &str,
    ) -> PyResult<Clips<'py>> {
        let unit = audio_unit(unit)?;
        let clips = py.detach(|| self.inner.audio_clips(&ranges, unit)).map_err(err)?;
        audio_arrays(py, clips)
    }

    fn has_video_stream(&self) -> PyResult<bool> {
        self.inner.has_video_stream().map_err(err)
    }

    fn has_audio_stream(&self) -> PyResult<bool> {
        self.inner.has_audio_stream().map_err(err)
    }

    /// The reference's `get_metadata` fields as a dict.
    #[allow(clippy::too_many_arguments, clippy::fn_params_excessive_bools)]
    #[pyo3(signature = (video, video_duration, video_frame_count, video_frame_size, audio, audio_duration, audio_num_samples))]
    fn metadata<'py>(
        &self,
        py: Python<'py>,
        video: bool,
        video_duration: bool,
        video_frame_count: bool,
        video_frame_size: bool,
        audio: bool,
        audio_duration: bool,
        audio_num_samples: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let request = MetadataRequest {
            video,
            video_duration,
            video_frame_count,
            video_frame_size,
            audio,
            audio_duration,
            audio_num_samples,
        };
        let m = py.detach(|| self.inner.metadata(request)).map_err(err)?;
        let d = PyDict::new(py);
        d.set_item("video_duration", m.video_duration)?;
        d.set_item("video_num_frames", m.video_num_frames)?;
        d.set_item("video_fps", m.video_fps)?;
        d.set_item("video_width", m.video_width)?;
        d.set_item("video_height", m.video_height)?;
        d.set_item("audio_duration", m.audio_duration)?;
        d.set_item("audio_channels", m.audio_channels)?;
        d.set_item("audio_sample_rate", m.audio_sample_rate)?;
        d.set_item("audio_num_samples", m.audio_num_samples)?;
        Ok(d)
    }
}
