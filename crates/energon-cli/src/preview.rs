//! `energon preview PATH`: prints samples field by field; images as their shape plus a small
//! ASCII rendering, so a dataset can be eyeballed in a terminal.
//!
//! Interactive (a terminal, no `-n`): asks "Continue?" after each sample. With `-n N` or
//! `--non-interactive` (or without a terminal) it prints the first N samples (default 10) of
//! each split part without asking.

use std::{fmt::Write as _, path::PathBuf};

use clap::Args;
use energon_index::{
    dataset_config::sample_type_info,
    discover::{DatasetKind, classify},
};
use energon_reader::{Decoded, Sample, Tensor, decode::TensorData, sample::FieldValue};

use crate::{prompt, splits};

/// Flags of `energon preview`.
#[derive(Debug, Args)]
pub(crate) struct PreviewArgs {
    /// Prepared dataset folder (or JSONL file).
    path: PathBuf,
    /// The split parts to show, comma-separated.
    #[arg(long = "split-parts", default_value = "train,val,test")]
    split_parts: String,
    /// Dataset config file name inside .nv-meta.
    #[arg(long = "dataset-config", default_value = energon_index::DATASET_YAML)]
    dataset_config: String,
    /// Split config file name inside .nv-meta.
    #[arg(long = "split-config", default_value = energon_index::SPLIT_YAML)]
    split_config: String,
    /// Print this many samples per split part without asking.
    #[arg(short = 'n', long = "num-samples", value_name = "N")]
    num_samples: Option<u64>,
    /// Never ask; print the first N samples (default 10) of each split part.
    #[arg(long = "non-interactive")]
    non_interactive: bool,
    /// Width of the image renderings, in characters.
    #[arg(long, default_value_t = 40)]
    width: usize,
}

/// Samples printed per split part when nobody is asked.
const DEFAULT_COUNT: u64 = 10;

pub(crate) fn run(args: PreviewArgs) -> anyhow::Result<u8> {
    let interactive = !args.non_interactive && args.num_samples.is_none() && prompt::interactive();
    let limit = args.num_samples.unwrap_or(if interactive { u64::MAX } else { DEFAULT_COUNT });
    let is_jsonl = classify(&args.path)? == DatasetKind::Jsonl;
    let split_parts = splits::split_parts(is_jsonl, &args.split_parts);
    for split_part in split_parts {
        let Some(reader) =
            splits::open_split(&args.path, split_part, &args.split_config, &args.dataset_config)?
        else {
            outln!("Dataset {split_part} is empty. Skipping.");
            continue;
        };
        if !is_jsonl {
            outln!("Split part {split_part}: {} samples of {}", reader.len(), reader.sample_type());
        }
        if let Some(loader) = reader.custom_loader() {
            outln!("(custom loader {loader} cannot run here: showing the raw parts)");
        }
        let mut shown = 0u64;
        for index in 0..reader.len() {
            if shown >= limit {
                break;
            }
            let Some(sample) = reader.read(index)? else { continue };
            out!("{}", render_sample(shown, &sample, args.width));
            shown += 1;
            if interactive && !prompt::confirm("Continue?", false)? {
                outln!("Exiting Preview");
                break;
            }
        }
    }
    Ok(0)
}

/// One sample: its key, then every field of its type (or every part of a crude sample).
fn render_sample(idx: u64, sample: &Sample, width: usize) -> String {
    let mut out = format!("Sample {idx}\n");
    let types = sample_type_info(sample.type_name());
    // A typed sample's field types as Python prints the dataclass fields' annotations.
    let key_type = if types.is_some() { annotation_repr("str") } else { "str".to_owned() };
    let _ = writeln!(out, " - __key__ ({key_type}): {}", py_str(sample.key()));
    for (name, value) in sample.fields() {
        let type_name = match (types, value) {
            (Some(info), _) => info
                .fields
                .iter()
                .find(|f| f.name == name)
                .map_or_else(String::new, |f| annotation_repr(f.type_name)),
            (None, FieldValue::Decoded(d)) => decoded_type(d).to_owned(),
            (None, _) => String::new(),
        };
        let _ = writeln!(out, " - {name} ({type_name}): {}", render(value, "   ", width));
    }
    out
}

/// A type annotation as Python prints it: a class as `<class 'torch.Tensor'>`, a `typing`
/// construct as `typing.Optional[int]` (its `typing` names qualified).
fn annotation_repr(annotation: &str) -> String {
    const TYPING: &[&str] = &["Any", "Dict", "List", "Optional", "Tuple", "Union"];
    if !annotation.contains('[') {
        let class = match annotation {
            "AVDecoder" => "megatron.energon.av.av_decoder.AVDecoder",
            other => other,
        };
        return format!("<class '{class}'>");
    }
    // `Optional[Union[A, B]]` is `Union[A, B, None]`, which Python prints with `NoneType`.
    if let Some(inner) =
        annotation.strip_prefix("Optional[Union[").and_then(|r| r.strip_suffix("]]"))
    {
        return annotation_repr(&format!("Union[{inner}, NoneType]"));
    }
    let mut out = String::with_capacity(annotation.len() + 16);
    let mut word = String::new();
    for c in annotation.chars().chain(std::iter::once('\0')) {
        if c.is_alphanumeric() || c == '_' || c == '.' {
            word.push(c);
            continue;
        }
        if TYPING.contains(&word.as_str()) {
            out.push_str("typing.");
        }
        out.push_str(&word);
        word.clear();
        if c != '\0' {
            out.push(c);
        }
    }
    out
}

fn decoded_type(value: &Decoded) -> &'static str {
    match value {
        Decoded::Image(_) => "image",
        Decoded::Text(_) => "str",
        Decoded::Json(_) => "json",
        Decoded::Int(_) => "int",
        Decoded::Tensor(_) => "array",
        Decoded::Audio(_) => "audio",
        Decoded::Video(_) => "video",
        _ => "bytes",
    }
}

fn render(value: FieldValue<'_>, indent: &str, width: usize) -> String {
    match value {
        FieldValue::None => "None".to_owned(),
        FieldValue::Tensor(t) => render_tensor(t, indent, width),
        FieldValue::Text(s) => py_str(s),
        FieldValue::Int(i) => i.to_string(),
        FieldValue::Texts(items) => {
            format!("[{}]", items.iter().map(|s| py_str(s)).collect::<Vec<_>>().join(", "))
        }
        FieldValue::Ints(items) => format!("{items:?}"),
        FieldValue::Tensors(items) => render_list(
            items.iter().map(|t| render_tensor(t, &format!("{indent}    "), width)),
            indent,
        ),
        FieldValue::Video(v) => format!("{v}"),
        FieldValue::Decoded(d) => render_decoded(d, indent, width),
        FieldValue::List(items) => render_list(
            items.iter().map(|d| render_decoded(d, &format!("{indent}    "), width)),
            indent,
        ),
        _ => "?".to_owned(),
    }
}

fn render_list(items: impl Iterator<Item = String>, indent: &str) -> String {
    let items: Vec<String> = items.collect();
    format!("[\n{indent}  {}\n{indent}]", items.join(&format!("\n{indent}  ")))
}

fn render_decoded(value: &Decoded, indent: &str, width: usize) -> String {
    match value {
        Decoded::Image(t) | Decoded::Tensor(t) => render_tensor(t, indent, width),
        Decoded::Text(s) => py_str(s),
        Decoded::Int(i) => i.to_string(),
        Decoded::Json(v) => truncate(&v.to_string(), 300),
        Decoded::Bytes(b) => {
            format!("bytes(length={}, value={})", b.len(), py_bytes(&b[..b.len().min(128)]))
        }
        Decoded::Video(v) => format!("{v}"),
        other => other.summary(),
    }
}

/// Shape and dtype; images (2-D, or 3-D with 1, 3 or 4 channels first or last) also as ASCII
/// art; 1-D arrays with their first 128 values.
fn render_tensor(t: &Tensor, indent: &str, width: usize) -> String {
    let head = format!("Tensor(shape={:?}, dtype={})", t.shape, t.dtype());
    if t.shape.len() == 1 {
        return format!("{head}: [{}]", first_values(&t.data, 128));
    }
    let Some((h, w, gray)) = grayscale(t) else { return head };
    if h == 0 || w == 0 {
        return head;
    }
    let art = ascii_art(&gray, h, w, width.max(1));
    format!("{head}:\n{indent}{}\n", art.join(&format!("\n{indent}")))
}

/// A grayscale float image of an image-shaped tensor: (height, width, values).
fn grayscale(t: &Tensor) -> Option<(usize, usize, Vec<f32>)> {
    let values = as_f32(&t.data)?;
    let (h, w, c, channels_last) = match t.shape[..] {
        [h, w] => (h, w, 1, true),
        [h, w, c] if matches!(c, 1 | 3 | 4) => (h, w, c, true),
        [c, h, w] if matches!(c, 1 | 3 | 4) => (h, w, c, false),
        _ => return None,
    };
    let used = c.min(3);
    let mut gray = vec![0f32; h * w];
    for (i, g) in gray.iter_mut().enumerate() {
        let sum: f32 = (0..used)
            .map(|ch| if channels_last { values[i * c + ch] } else { values[ch * h * w + i] })
            .sum();
        *g = sum / used as f32;
    }
    Some((h, w, gray))
}

fn as_f32(data: &TensorData) -> Option<Vec<f32>> {
    Some(match data {
        TensorData::U8(v) => v.iter().map(|&x| f32::from(x)).collect(),
        TensorData::F32(v) => v.clone(),
        TensorData::F64(v) => v.iter().map(|&x| x as f32).collect(),
        TensorData::U16(v) => v.iter().map(|&x| f32::from(x)).collect(),
        TensorData::I16(v) => v.iter().map(|&x| f32::from(x)).collect(),
        TensorData::I32(v) => v.iter().map(|&x| x as f32).collect(),
        _ => return None,
    })
}

/// Box-averages the image to `width` columns (half as many rows per column, since terminal
/// cells are about twice as tall as wide), stretches it to the full gray range and maps it to
/// characters (the reference's ramp).
fn ascii_art(gray: &[f32], h: usize, w: usize, width: usize) -> Vec<String> {
    const RAMP: &[u8] = b" .:-=+*#%@@";
    let dst_w = width.min(w);
    let dst_h = ((dst_w as f64 * 0.5 * h as f64 / w as f64).round() as usize).clamp(1, h);
    let mut cells = vec![0f32; dst_w * dst_h];
    for (y, row) in cells.chunks_mut(dst_w).enumerate() {
        let (y0, y1) = (y * h / dst_h, ((y + 1) * h / dst_h).max(y * h / dst_h + 1));
        for (x, cell) in row.iter_mut().enumerate() {
            let (x0, x1) = (x * w / dst_w, ((x + 1) * w / dst_w).max(x * w / dst_w + 1));
            let mut sum = 0f32;
            for yy in y0..y1 {
                sum += gray[yy * w + x0..yy * w + x1].iter().sum::<f32>();
            }
            *cell = sum / ((y1 - y0) * (x1 - x0)) as f32;
        }
    }
    let (min, max) = cells.iter().fold((f32::MAX, f32::MIN), |(a, b), &v| (a.min(v), b.max(v)));
    let span = if max > min { max - min } else { 1.0 };
    cells
        .chunks(dst_w)
        .map(|row| {
            row.iter()
                .map(|&v| RAMP[(((v - min) / span) * 10.0).clamp(0.0, 10.0) as usize] as char)
                .collect()
        })
        .collect()
}

fn first_values(data: &TensorData, n: usize) -> String {
    fn join<T: std::fmt::Debug>(v: &[T], n: usize) -> String {
        let mut s: Vec<String> = v.iter().take(n).map(|x| format!("{x:?}")).collect();
        if v.len() > n {
            s.push("...".to_owned());
        }
        s.join(", ")
    }
    match data {
        TensorData::Bool(v) => join(v, n),
        TensorData::U8(v) => join(v, n),
        TensorData::I8(v) => join(v, n),
        TensorData::U16(v) | TensorData::F16(v) => join(v, n),
        TensorData::I16(v) => join(v, n),
        TensorData::U32(v) => join(v, n),
        TensorData::I32(v) => join(v, n),
        TensorData::U64(v) => join(v, n),
        TensorData::I64(v) => join(v, n),
        TensorData::F32(v) => join(v, n),
        TensorData::F64(v) => join(v, n),
        _ => String::new(),
    }
}

/// A string as Python's `repr` writes it (single quotes unless the text has some).
fn py_str(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in truncate(s, 1000).chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Bytes as Python's `repr` writes them: `b'...'`.
fn py_bytes(bytes: &[u8]) -> String {
    let mut out = String::from("b'");
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'\'' => out.push_str("\\'"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out.push('\'');
    out
}

fn truncate(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_print_as_python_prints_them() {
        assert_eq!(annotation_repr("str"), "<class 'str'>");
        assert_eq!(annotation_repr("torch.Tensor"), "<class 'torch.Tensor'>");
        assert_eq!(annotation_repr("Optional[int]"), "typing.Optional[int]");
        assert_eq!(
            annotation_repr("Optional[Union[torch.Tensor, List[str]]]"),
            "typing.Union[torch.Tensor, typing.List[str], NoneType]"
        );
        assert_eq!(
            annotation_repr("Optional[Dict[str, Any]]"),
            "typing.Optional[typing.Dict[str, typing.Any]]"
        );
    }
}
