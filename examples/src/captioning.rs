//! A captioning task encoder: images resized (and flipped at random, restorably) into a float
//! tensor, captions tokenized; batches stack the images and pad the tokens.

use energon_cook::{
    HookError, HookResult, Hooks, Keyed, Loader, LoaderBuilder, LoaderSpec, Outputs, SampleContext,
    TaskEncoder,
};
use energon_dist::WorkerConfig;
use energon_reader::{Sample, Tensor, decode::TensorData};
use image::{RgbImage, imageops};

use crate::Tokenizer;

/// Resizes images to `image_size` squared and tokenizes captions (at most `max_tokens`).
#[derive(Debug, Clone)]
pub struct CaptioningEncoder {
    /// The side of the square images, in pixels.
    pub image_size: u32,
    /// Captions are cut to this many tokens.
    pub max_tokens: usize,
    /// The tokenizer.
    pub tokenizer: Tokenizer,
}

/// One encoded sample.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedCaption {
    /// The sample key.
    pub key: String,
    /// `f32` CHW in `[0, 1]`, `3 x image_size x image_size`.
    pub image: Tensor,
    /// `i64` token ids.
    pub tokens: Tensor,
}

/// A batch: images stacked, tokens padded to the longest caption.
#[derive(Debug, Clone, PartialEq)]
pub struct CaptionBatch {
    /// The sample keys.
    pub keys: Vec<String>,
    /// `f32`, `batch x 3 x image_size x image_size`.
    pub images: Tensor,
    /// `i64`, `batch x longest`, padded with [`Tokenizer::PAD`].
    pub tokens: Tensor,
    /// The caption lengths before padding.
    pub lengths: Vec<usize>,
}

impl TaskEncoder for CaptioningEncoder {
    type Sample = Sample;
    type Encoded = EncodedCaption;
    type Batch = CaptionBatch;
    type Output = CaptionBatch;

    fn hooks(&self) -> Hooks {
        Hooks { encode_sample: true, ..Hooks::NONE }
    }

    fn encode_sample(
        &self,
        sample: Sample,
        ctx: &SampleContext,
    ) -> HookResult<Outputs<EncodedCaption>> {
        let Sample::Captioning(sample) = sample else {
            return Err(HookError::msg(format!(
                "expected a CaptioningSample, got a {}",
                sample.type_name()
            )));
        };
        // Drawn from the per-sample seed: the same flip when the sample is made again on restore.
        let flip = ctx.rng().randbelow(2)? == 1;
        let image = resize(&sample.image, self.image_size, flip)?;
        let mut tokens = self.tokenizer.encode(&sample.caption);
        tokens.truncate(self.max_tokens);
        let tokens = Tensor {
            shape: vec![tokens.len()],
            data: TensorData::I64(tokens.into_iter().map(i64::from).collect()),
        };
        Ok(Outputs::One(EncodedCaption { key: sample.meta.key, image, tokens }))
    }

    fn batch(
        &self,
        samples: Vec<Keyed<EncodedCaption>>,
        _: &SampleContext,
    ) -> HookResult<Outputs<CaptionBatch>> {
        let images: Vec<&Tensor> = samples.iter().map(|s| &s.value.image).collect();
        let tokens: Vec<&Tensor> = samples.iter().map(|s| &s.value.tokens).collect();
        Ok(Outputs::One(CaptionBatch {
            keys: samples.iter().map(|s| s.value.key.clone()).collect(),
            images: Tensor::stack_padded(&images).map_err(HookError::msg)?,
            tokens: Tensor::stack_padded(&tokens).map_err(HookError::msg)?,
            lengths: samples.iter().map(|s| s.value.tokens.shape[0]).collect(),
        }))
    }

    fn config(&self) -> Vec<(String, String)> {
        vec![
            ("image_size".to_owned(), self.image_size.to_string()),
            ("max_tokens".to_owned(), self.max_tokens.to_string()),
        ]
    }
}

/// An `u8` HWC RGB image, resized to `size` squared (bilinear), flipped horizontally if `flip`,
/// as `f32` CHW in `[0, 1]`.
fn resize(image: &Tensor, size: u32, flip: bool) -> HookResult<Tensor> {
    let (&[h, w, 3], Some(pixels)) = (image.shape.as_slice(), image.as_u8()) else {
        return Err(HookError::msg(format!(
            "expected an RGB u8 image, got {:?} {}",
            image.shape,
            image.dtype()
        )));
    };
    let (w, h) = (u32::try_from(w)?, u32::try_from(h)?);
    let img = RgbImage::from_raw(w, h, pixels.to_vec())
        .ok_or_else(|| HookError::msg("image size mismatch"))?;
    let mut img = imageops::resize(&img, size, size, imageops::FilterType::Triangle);
    if flip {
        imageops::flip_horizontal_in_place(&mut img);
    }
    let plane = (size * size) as usize;
    let mut chw = vec![0f32; 3 * plane];
    for (i, pixel) in img.pixels().enumerate() {
        for c in 0..3 {
            chw[c * plane + i] = f32::from(pixel[c]) / 255.0;
        }
    }
    let side = size as usize;
    Ok(Tensor { shape: vec![3, side, side], data: TensorData::F32(chw) })
}

/// The training loader of the fixture with this encoder: rank 0 of 1, `num_workers` workers, a
/// shuffle buffer of 32, batches of `batch_size`.
pub fn loader(
    num_workers: usize,
    batch_size: usize,
) -> energon_cook::Result<Loader<Keyed<CaptionBatch>>> {
    builder(num_workers, batch_size)?.build_batches()
}

/// The builder of [`loader`] (to restore a saved state into).
pub fn builder(
    num_workers: usize,
    batch_size: usize,
) -> energon_cook::Result<LoaderBuilder<Sample, CaptioningEncoder>> {
    let worker_config = WorkerConfig::new(0, 1, num_workers)?;
    let encoder =
        CaptioningEncoder { image_size: 24, max_tokens: 16, tokenizer: Tokenizer::default() };
    let mut spec = LoaderSpec::new(crate::fixture(), worker_config);
    spec.shuffle_buffer_size = 32;
    spec.batch_size = Some(batch_size);
    Ok(spec.samples()?.task_encoder(encoder))
}
