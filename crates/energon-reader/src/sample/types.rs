//! The sample types of `megatron.energon`, generated from one table of fields.

use crate::{
    decode::{Decoded, Tensor},
    error::Result,
    field_map::FieldSource,
    sample::{CrudeSample, Field, FieldValue, FieldsSample, IntoField, IntoFieldValue, SampleMeta},
};

/// Declares the sample types: a struct per type (base fields in `meta`, then the type's own
/// fields in the reference's order), how a field map fills it, and the [`Sample`] enum.
///
/// Each field says how it is filled: `required` (an error if unmapped), `optional` (`None` if
/// unmapped) or `zero` (an integer defaulting to 0).
macro_rules! sample_types {
    ($(
        $(#[$doc:meta])*
        $variant:ident($name:ident, $py:literal) {
            $( $(#[$fdoc:meta])* $field:ident: $ty:ty = $fill:ident, )*
        }
    )*) => {
        $(
            $(#[$doc])*
            #[derive(Debug, Clone, PartialEq)]
            pub struct $name {
                /// `__key__`, `__restore_key__`, `__subflavors__`, `__sources__`.
                pub meta: SampleMeta,
                $( $(#[$fdoc])* pub $field: $ty, )*
            }

            impl $name {
                /// The reference's class name.
                pub const TYPE_NAME: &'static str = $py;

                /// Fills the fields from a field map.
                #[allow(unused_variables)]
                pub(crate) fn build(meta: SampleMeta, src: &mut FieldSource<'_>) -> Result<Self> {
                    $( let $field = src.$fill(stringify!($field))?; )*
                    Ok($name { meta, $( $field, )* })
                }

                /// The type's own fields (base fields excluded), in declaration order.
                pub fn fields(&self) -> Vec<(&'static str, FieldValue<'_>)> {
                    vec![$( (stringify!($field), self.$field.view()), )*]
                }

                /// The base fields and the type's own fields, owned, in declaration order.
                pub fn into_fields(self) -> (SampleMeta, Vec<(&'static str, Field)>) {
                    (self.meta, vec![$( (stringify!($field), self.$field.into_field()), )*])
                }
            }
        )*

        /// A sample of any built-in type, or a crude one.
        #[derive(Debug, Clone, PartialEq)]
        #[non_exhaustive]
        #[expect(
            clippy::large_enum_variant,
            reason = "a sample is built once and moved a few times; boxing would add an allocation"
        )]
        pub enum Sample {
            $( #[doc = concat!("`", $py, "`.")] $variant($name), )*
            /// `CrudeSample`: a plain map of decoded parts.
            Crude(CrudeSample),
            /// A class the Rust types do not build: its fields, for the caller to build it.
            Fields(FieldsSample),
        }

        impl Sample {
            /// The reference's class name (`CaptioningSample`, `CrudeSample`, ...; a user's
            /// class by its name).
            pub fn type_name(&self) -> &str {
                match self {
                    $( Sample::$variant(_) => $py, )*
                    Sample::Crude(_) => "CrudeSample",
                    Sample::Fields(s) => &s.class.class,
                }
            }

            /// `__key__`, `__restore_key__`, `__subflavors__`, `__sources__`.
            pub fn meta(&self) -> &SampleMeta {
                match self {
                    $( Sample::$variant(s) => &s.meta, )*
                    Sample::Crude(s) => &s.meta,
                    Sample::Fields(s) => &s.meta,
                }
            }

            /// The base fields, to change them (a metadataset sets its leaves' subflavors).
            pub fn meta_mut(&mut self) -> &mut SampleMeta {
                match self {
                    $( Sample::$variant(s) => &mut s.meta, )*
                    Sample::Crude(s) => &mut s.meta,
                    Sample::Fields(s) => &mut s.meta,
                }
            }

            /// The fields of the sample's type (base fields excluded) in declaration order;
            /// for a crude sample, its parts.
            pub fn fields(&self) -> Vec<(&str, FieldValue<'_>)> {
                match self {
                    $( Sample::$variant(s) => s.fields(), )*
                    Sample::Crude(s) => {
                        s.parts.iter().map(|(n, v)| (n.as_str(), FieldValue::Decoded(v))).collect()
                    }
                    Sample::Fields(s) => {
                        s.fields.iter().map(|(n, v)| (n.as_str(), FieldValue::Decoded(v))).collect()
                    }
                }
            }

            /// The base fields and the fields of the sample's type, owned, in declaration
            /// order; for a crude sample, its parts (field names are then the part names).
            pub fn into_fields(self) -> (SampleMeta, Vec<(String, Field)>) {
                match self {
                    $( Sample::$variant(s) => {
                        let (meta, fields) = s.into_fields();
                        (meta, fields.into_iter().map(|(n, v)| (n.to_owned(), v)).collect())
                    } )*
                    Sample::Crude(s) => {
                        let fields = s.parts.into_iter().map(|(n, v)| (n, Field::Decoded(v)));
                        (s.meta, fields.collect())
                    }
                    Sample::Fields(s) => {
                        let fields = s.fields.into_iter().map(|(n, v)| (n, Field::Decoded(v)));
                        (s.meta, fields.collect())
                    }
                }
            }

            /// Builds a sample of the built-in type `type_name` from a field map.
            pub(crate) fn build_typed(
                type_name: &str,
                meta: SampleMeta,
                src: &mut FieldSource<'_>,
            ) -> Option<Result<Sample>> {
                Some(match type_name {
                    $( $py => $name::build(meta, src).map(Sample::$variant), )*
                    _ => return None,
                })
            }
        }
    };
}

sample_types! {
    /// `Sample`: the base class, with no fields of its own.
    Plain(PlainSample, "Sample") {}

    /// An image with a caption.
    Captioning(CaptioningSample, "CaptioningSample") {
        /// The image.
        image: Tensor = required,
        /// The caption.
        caption: String = required,
    }

    /// An image.
    Image(ImageSample, "ImageSample") {
        /// The image.
        image: Tensor = required,
    }

    /// An image with a class label.
    ImageClassification(ImageClassificationSample, "ImageClassificationSample") {
        /// The image.
        image: Tensor = required,
        /// The class index.
        label: Option<i64> = optional,
        /// The class name.
        label_name: Option<String> = optional,
    }

    /// A sequence of images and texts.
    Interleaved(InterleavedSample, "InterleavedSample") {
        /// The sequence (images and texts).
        sequence: Vec<Decoded> = required,
    }

    /// A multiple-choice question about an image.
    MultiChoiceVqa(MultiChoiceVqaSample, "MultiChoiceVQASample") {
        /// The image.
        image: Tensor = required,
        /// The question.
        context: String = required,
        /// The possible answers.
        choices: Option<Vec<String>> = optional,
        /// Index of the correct answer.
        correct_choice_idx: i64 = zero,
    }

    /// An image with OCR annotations.
    Ocr(OcrSample, "OCRSample") {
        /// The image.
        image: Tensor = required,
        /// The text in the image.
        text: String = required,
        /// Bounding boxes of the blocks.
        block_boxes: Option<Decoded> = optional,
        /// Classes of the blocks.
        block_classes: Option<Decoded> = optional,
        /// Texts of the blocks.
        block_text: Option<Vec<String>> = optional,
        /// Bounding boxes of the lines.
        lines_boxes: Option<Decoded> = optional,
        /// Texts of the lines.
        lines_text: Option<Vec<String>> = optional,
        /// Bounding boxes of the words.
        words_boxes: Option<Decoded> = optional,
        /// Texts of the words.
        words_text: Option<Vec<String>> = optional,
        /// Bounding boxes of the characters.
        chars_boxes: Option<Decoded> = optional,
        /// Texts of the characters.
        chars_text: Option<Vec<String>> = optional,
    }

    /// Images and texts with their similarities.
    SimilarityInterleaved(SimilarityInterleavedSample, "SimilarityInterleavedSample") {
        /// The images.
        images: Vec<Tensor> = required,
        /// The texts.
        texts: Vec<String> = required,
        /// Audio clips.
        audio: Option<Vec<Decoded>> = optional,
        /// Videos.
        video: Option<Vec<Decoded>> = optional,
        /// Similarity of each image to each text.
        similarity_matrix: Option<Decoded> = optional,
        /// For each image, the index of its text.
        matched_text_indices: Option<Vec<i64>> = optional,
    }

    /// A text.
    Text(TextSample, "TextSample") {
        /// The text.
        text: String = required,
    }

    /// A question about an image, with answers.
    Vqa(VqaSample, "VQASample") {
        /// The image.
        image: Tensor = required,
        /// The question.
        context: String = required,
        /// The answers.
        answers: Option<Vec<String>> = optional,
        /// The weight of each answer.
        answer_weights: Option<Decoded> = optional,
    }

    /// A question about an image with text, with answers and word annotations.
    VqaOcr(VqaOcrSample, "VQAOCRSample") {
        /// The image.
        image: Tensor = required,
        /// The question.
        context: String = required,
        /// The text in the image.
        text: String = required,
        /// The answers.
        answers: Option<Vec<String>> = optional,
        /// The weight of each answer.
        answer_weights: Option<Decoded> = optional,
        /// Bounding boxes of the words.
        words_boxes: Option<Decoded> = optional,
        /// Texts of the words.
        words_text: Option<Vec<String>> = optional,
    }

    /// A question about a video, with answers.
    VidQa(VidQaSample, "VidQASample") {
        /// The video: its bytes ([`Decoded::Video`]), or its frames with
        /// [`crate::decode::AvDecode::Frames`].
        video: Decoded = required,
        /// The question.
        context: String = required,
        /// The answers.
        answers: Option<Vec<String>> = optional,
        /// The weight of each answer.
        answer_weights: Option<Decoded> = optional,
    }
}
