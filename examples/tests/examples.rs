//! The examples run end to end: what they yield, and that they resume exactly.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use energon_cook::{Keyed, LoaderBuilder};
use energon_dist::WorkerConfig;
use energon_examples::{captioning, crude_cooker, fixture, text_packing};
use energon_reader::{
    Dataset, OpenOptions, ReaderOptions, Sample, SampleReader, decode::TensorData,
};

#[test]
fn captioning_batches_hold_resized_images_and_padded_tokens() {
    let batches: Vec<_> =
        captioning::loader(2, 8).unwrap().take(6).map(|b| b.unwrap().value.value).collect();
    // The same samples, in the same order, as a loader of keys with the same settings.
    let cfg = WorkerConfig::new(0, 1, 2).unwrap();
    let dataset = Arc::new(Dataset::open(&fixture(), &OpenOptions::default()).unwrap());
    let keys: Vec<String> = LoaderBuilder::new(dataset, cfg, |raw| Ok(Some(raw.key)))
        .shuffle_buffer_size(32)
        .batch_size(Some(8))
        .build_batches()
        .unwrap()
        .take(6)
        .flat_map(|b| b.unwrap().value.value.samples.into_iter().map(|s| s.value))
        .collect();
    assert_eq!(batches.iter().flat_map(|b| b.keys.clone()).collect::<Vec<_>>(), keys);
    for batch in &batches {
        assert_eq!(batch.images.shape, [8, 3, 24, 24]);
        let TensorData::F32(pixels) = &batch.images.data else { panic!("f32 images") };
        assert!(pixels.iter().all(|p| (0.0..=1.0).contains(p)));
        let longest = *batch.lengths.iter().max().unwrap();
        assert!(longest <= 16);
        assert_eq!(batch.tokens.shape, [8, longest]);
        let TensorData::I64(tokens) = &batch.tokens.data else { panic!("i64 tokens") };
        for (row, &len) in batch.lengths.iter().enumerate() {
            let row = &tokens[row * longest..(row + 1) * longest];
            assert_eq!(row[0], 1, "BOS");
            assert!(row[len..].iter().all(|&t| t == 0), "padding");
        }
    }
}

#[test]
fn captioning_resumes_with_the_same_random_flips() {
    for workers in [0, 2] {
        let mut loader = captioning::loader(workers, 4).unwrap();
        for _ in 0..3 {
            loader.next().unwrap().unwrap();
        }
        let state = loader.save_state().unwrap();
        let want: Vec<_> = loader.take(4).map(|b| b.unwrap().value).collect();
        let restored =
            captioning::builder(workers, 4).unwrap().restore_state(state).build_batches().unwrap();
        let got: Vec<_> = restored.take(4).map(|b| b.unwrap().value).collect();
        assert_eq!(got, want, "{workers} workers");
    }
}

#[test]
fn text_packing_fills_packs_up_to_the_budget() {
    let batches: Vec<_> =
        text_packing::loader(2).unwrap().take(20).map(|b| b.unwrap().value.value).collect();
    let mut texts = 0;
    let mut multi = 0;
    for batch in &batches {
        assert_eq!(batch.tokens.shape, [4, 24]);
        let (TensorData::I64(tokens), TensorData::I64(segments)) =
            (&batch.tokens.data, &batch.segment_ids.data)
        else {
            panic!("i64 tensors")
        };
        for (row, keys) in batch.keys.iter().enumerate() {
            texts += keys.len();
            multi += usize::from(keys.len() > 1);
            let segments = &segments[row * 24..(row + 1) * 24];
            let tokens = &tokens[row * 24..(row + 1) * 24];
            // Each text starts with BOS where its segment starts.
            for (i, (&segment, &token)) in segments.iter().zip(tokens).enumerate() {
                let starts = segment > 0 && (i == 0 || segments[i - 1] != segment);
                assert_eq!(starts, token == 1, "row {row}: {segments:?} {tokens:?}");
            }
            assert_eq!(*segments.iter().max().unwrap() as usize, keys.len());
        }
    }
    assert!(multi > 40, "most packs hold several texts: {multi} of 80");
    assert!(texts > 120, "{texts}");
}

#[test]
fn text_packing_resumes_inside_the_packing_buffer() {
    for workers in [0, 2] {
        for cut in [1, 3, 5] {
            let mut loader = text_packing::loader(workers).unwrap();
            for _ in 0..cut {
                loader.next().unwrap().unwrap();
            }
            let state = loader.save_state().unwrap();
            let want: Vec<_> = loader.take(6).map(|b| b.unwrap().value).collect();
            let restored = text_packing::builder(workers)
                .unwrap()
                .restore_state(state)
                .build_batches()
                .unwrap();
            let got: Vec<_> = restored.take(6).map(|b| b.unwrap().value).collect();
            assert_eq!(got, want, "{workers} workers, cut {cut}");
        }
    }
}

#[test]
fn the_crude_cooker_reads_images_from_the_auxiliary_source() {
    let reader = SampleReader::open(&fixture(), &ReaderOptions::default()).unwrap();
    let mut loader = crude_cooker::loader(2).unwrap();
    for _ in 0..10 {
        let batch = loader.next().unwrap().unwrap();
        assert_eq!(batch.value.value.samples.len(), 4);
        for Keyed { value, .. } in batch.value.value.samples {
            let Sample::Captioning(cooked) = value else { panic!("a captioning sample") };
            // The JSONL record `i` describes the tar sample `i`: same caption, and the image is
            // the tar's.
            let index: u64 = cooked.meta.key.parse().unwrap();
            let Some(Sample::Captioning(original)) = reader.read(index).unwrap() else { panic!() };
            assert_eq!(cooked.caption, original.caption);
            assert_eq!(cooked.image, original.image);
            assert_eq!(cooked.meta.sources.len(), 2, "the record and the image");
        }
    }
    let mut loader = crude_cooker::loader(0).unwrap();
    loader.next().unwrap().unwrap();
    let state = loader.save_state().unwrap();
    let want: Vec<_> = loader.take(3).map(|b| b.unwrap().value).collect();
    let restored = crude_cooker::builder(&energon_examples::data("crude-with-aux.yaml"), 0)
        .unwrap()
        .restore_state(state)
        .build_batches()
        .unwrap();
    assert_eq!(restored.take(3).map(|b| b.unwrap().value).collect::<Vec<_>>(), want);
}
