//! A text packing task encoder: crude JSONL records cooked into text samples, tokenized, and
//! packed greedily into sequences of at most `budget` tokens; batches pad the packs to the
//! budget, with segment ids telling the packed texts apart.

use energon_cook::{
    Cooker, HookError, HookResult, Hooks, Keyed, Loader, LoaderBuilder, LoaderSpec, Outputs,
    SampleContext, TaskEncoder,
};
use energon_dist::WorkerConfig;
use energon_reader::{Decoded, Sample, Tensor, decode::TensorData, sample::TextSample};

use crate::Tokenizer;

/// Packs tokenized texts into sequences of at most `budget` tokens.
#[derive(Debug, Clone)]
pub struct PackingEncoder {
    /// Tokens per packed sequence.
    pub budget: usize,
    /// The tokenizer.
    pub tokenizer: Tokenizer,
}

/// Tokens of one or several texts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packed {
    /// The keys of the texts, in order.
    pub keys: Vec<String>,
    /// Their tokens, one after the other.
    pub tokens: Vec<u32>,
    /// The number of tokens of each text.
    pub lengths: Vec<usize>,
}

/// A batch of packs, padded to the budget.
#[derive(Debug, Clone, PartialEq)]
pub struct PackedBatch {
    /// The keys of each pack's texts.
    pub keys: Vec<Vec<String>>,
    /// `i64`, `batch x budget`, padded with [`Tokenizer::PAD`].
    pub tokens: Tensor,
    /// `i64`, `batch x budget`: 1 for the first text of a pack, 2 for the second, ..., 0 for
    /// padding.
    pub segment_ids: Tensor,
}

/// Cooks a JSONL record `{"caption": ...}` into a text sample.
pub fn cook_caption(sample: Sample, _: &energon_cook::CookContext<'_>) -> HookResult<Sample> {
    let Sample::Crude(crude) = sample else {
        return Err(HookError::msg(format!(
            "expected a crude sample, got a {}",
            sample.type_name()
        )));
    };
    let Some(Decoded::Json(record)) = crude.get("json") else {
        return Err(HookError::msg("the record has no json part"));
    };
    let text =
        record["caption"].as_str().ok_or_else(|| HookError::msg("the record has no caption"))?;
    Ok(Sample::Text(TextSample { meta: crude.meta.clone(), text: text.to_owned() }))
}

impl TaskEncoder for PackingEncoder {
    type Sample = Sample;
    type Encoded = Packed;
    type Batch = PackedBatch;
    type Output = PackedBatch;

    fn hooks(&self) -> Hooks {
        Hooks { encode_sample: true, packing: true, ..Hooks::NONE }
    }

    fn cookers(&self) -> Vec<Cooker<Sample>> {
        vec![Cooker::new(cook_caption)]
    }

    fn encode_sample(&self, sample: Sample, _: &SampleContext) -> HookResult<Outputs<Packed>> {
        let Sample::Text(text) = sample else {
            return Err(HookError::msg(format!(
                "expected a TextSample, got a {}",
                sample.type_name()
            )));
        };
        let mut tokens = self.tokenizer.encode(&text.text);
        tokens.truncate(self.budget);
        Ok(Outputs::One(Packed { keys: vec![text.meta.key], lengths: vec![tokens.len()], tokens }))
    }

    /// Greedy fill: texts in buffer order, a new pack when the next one would pass the budget.
    fn select_samples_to_pack(
        &self,
        samples: &[Keyed<Packed>],
        _: &SampleContext,
    ) -> HookResult<Vec<Vec<usize>>> {
        let mut packs: Vec<Vec<usize>> = Vec::new();
        let mut used = self.budget;
        for (i, sample) in samples.iter().enumerate() {
            let n = sample.value.tokens.len();
            if used + n > self.budget {
                packs.push(Vec::new());
                used = 0;
            }
            packs.last_mut().expect("a pack was opened").push(i);
            used += n;
        }
        Ok(packs)
    }

    fn pack_selected_samples(
        &self,
        samples: Vec<Keyed<Packed>>,
        _: &SampleContext,
    ) -> HookResult<Outputs<Packed>> {
        let mut res = Packed { keys: Vec::new(), tokens: Vec::new(), lengths: Vec::new() };
        for sample in samples {
            res.keys.extend(sample.value.keys);
            res.tokens.extend(sample.value.tokens);
            res.lengths.extend(sample.value.lengths);
        }
        Ok(Outputs::One(res))
    }

    fn batch(
        &self,
        samples: Vec<Keyed<Packed>>,
        _: &SampleContext,
    ) -> HookResult<Outputs<PackedBatch>> {
        let n = samples.len();
        let mut tokens = vec![i64::from(Tokenizer::PAD); n * self.budget];
        let mut segment_ids = vec![0i64; n * self.budget];
        for (row, sample) in samples.iter().enumerate() {
            let mut at = row * self.budget;
            for (segment, &len) in sample.value.lengths.iter().enumerate() {
                segment_ids[at..at + len].fill(segment as i64 + 1);
                at += len;
            }
            let start = row * self.budget;
            for (slot, &token) in tokens[start..].iter_mut().zip(&sample.value.tokens) {
                *slot = i64::from(token);
            }
        }
        let shape = vec![n, self.budget];
        Ok(Outputs::One(PackedBatch {
            keys: samples.into_iter().map(|s| s.value.keys).collect(),
            tokens: Tensor { shape: shape.clone(), data: TensorData::I64(tokens) },
            segment_ids: Tensor { shape, data: TensorData::I64(segment_ids) },
        }))
    }

    fn config(&self) -> Vec<(String, String)> {
        vec![("budget".to_owned(), self.budget.to_string())]
    }
}

/// The training loader of the fixture's JSONL file with this encoder: rank 0 of 1,
/// `num_workers` workers, a packing buffer of 16 texts, packs of 24 tokens, batches of 4 packs.
pub fn builder(num_workers: usize) -> energon_cook::Result<LoaderBuilder<Sample, PackingEncoder>> {
    let worker_config = WorkerConfig::new(0, 1, num_workers)?;
    let path = crate::fixture().join("jsonl/data.jsonl");
    let mut spec = LoaderSpec::new(path, worker_config);
    spec.packing_buffer_size = Some(16);
    spec.batch_size = Some(4);
    Ok(spec.samples()?.task_encoder(PackingEncoder { budget: 24, tokenizer: Tokenizer::default() }))
}

/// The loader of [`builder`].
pub fn loader(num_workers: usize) -> energon_cook::Result<Loader<Keyed<PackedBatch>>> {
    builder(num_workers)?.build_batches()
}
