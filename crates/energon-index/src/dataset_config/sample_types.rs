//! The sample types Energon ships, with their fields (for `--sample-type` and `--field-map`
//! validation and the prepare menu).

/// One dataclass field of a sample type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleField {
    /// The field name (a `field_map` key).
    pub name: &'static str,
    /// The default value as Python prints it (`None`, `0`); `None` here means required.
    pub default: Option<&'static str>,
}

/// A sample type class of `megatron.energon`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleTypeInfo {
    /// The class name (`CaptioningSample`).
    pub name: &'static str,
    /// Its own fields in declaration order, after the [`BASE_FIELDS`] every sample has.
    pub fields: &'static [SampleField],
}

impl SampleTypeInfo {
    /// All dataclass fields, [`BASE_FIELDS`] first: the valid `field_map` keys.
    pub fn all_fields(&self) -> impl Iterator<Item = &'static SampleField> + use<> {
        BASE_FIELDS.iter().chain(self.fields.iter())
    }

    /// Whether `name` is a field of this type (base fields included).
    pub fn has_field(&self, name: &str) -> bool {
        self.all_fields().any(|f| f.name == name)
    }
}

const fn req(name: &'static str) -> SampleField {
    SampleField { name, default: None }
}

const fn opt(name: &'static str, default: &'static str) -> SampleField {
    SampleField { name, default: Some(default) }
}

/// The fields of the base `Sample` class, which every sample type inherits.
pub const BASE_FIELDS: &[SampleField] = &[
    req("__key__"),
    req("__restore_key__"),
    opt("__subflavors__", "None"),
    opt("__sources__", "None"),
];

/// The module prepare writes into `dataset.yaml` for built-in classes.
pub const ENERGON_MODULE: &str = "megatron.energon";

/// The class name `--sample-type` uses for crude datasets.
pub const CRUDE_CLASS: &str = "CrudeWebdataset";

/// The label of the crude choice, listed after [`SAMPLE_TYPES`] in the prepare menu.
pub const CRUDE_MENU_LABEL: &str = "Crude sample (plain dict for cooking)";

/// The sample types exported by `megatron.energon`, in the order of the prepare menu (sorted by
/// name, Python string order).
pub const SAMPLE_TYPES: &[SampleTypeInfo] = &[
    SampleTypeInfo { name: "CaptioningSample", fields: &[req("image"), req("caption")] },
    SampleTypeInfo {
        name: "ImageClassificationSample",
        fields: &[req("image"), opt("label", "None"), opt("label_name", "None")],
    },
    SampleTypeInfo { name: "ImageSample", fields: &[req("image")] },
    SampleTypeInfo { name: "InterleavedSample", fields: &[req("sequence")] },
    SampleTypeInfo {
        name: "MultiChoiceVQASample",
        fields: &[
            req("image"),
            req("context"),
            opt("choices", "None"),
            opt("correct_choice_idx", "0"),
        ],
    },
    SampleTypeInfo {
        name: "OCRSample",
        fields: &[
            req("image"),
            req("text"),
            opt("block_boxes", "None"),
            opt("block_classes", "None"),
            opt("block_text", "None"),
            opt("lines_boxes", "None"),
            opt("lines_text", "None"),
            opt("words_boxes", "None"),
            opt("words_text", "None"),
            opt("chars_boxes", "None"),
            opt("chars_text", "None"),
        ],
    },
    SampleTypeInfo { name: "Sample", fields: &[] },
    SampleTypeInfo {
        name: "SimilarityInterleavedSample",
        fields: &[
            req("images"),
            req("texts"),
            opt("audio", "None"),
            opt("video", "None"),
            opt("similarity_matrix", "None"),
            opt("matched_text_indices", "None"),
        ],
    },
    SampleTypeInfo { name: "TextSample", fields: &[req("text")] },
    SampleTypeInfo {
        name: "VQASample",
        fields: &[
            req("image"),
            req("context"),
            opt("answers", "None"),
            opt("answer_weights", "None"),
        ],
    },
    SampleTypeInfo {
        name: "VidQASample",
        fields: &[
            req("video"),
            req("context"),
            opt("answers", "None"),
            opt("answer_weights", "None"),
        ],
    },
];

/// `VQAOCRSample` is not exported at the top of `megatron.energon` (so it is not in the menu), but
/// the legacy `VQAOCRWebdataset` uses it.
static VQA_OCR_SAMPLE: SampleTypeInfo = SampleTypeInfo {
    name: "VQAOCRSample",
    fields: &[
        req("image"),
        req("context"),
        req("text"),
        opt("answers", "None"),
        opt("answer_weights", "None"),
        opt("words_boxes", "None"),
        opt("words_text", "None"),
    ],
};

/// Looks a built-in sample type up by class name (menu types and `VQAOCRSample`).
pub fn find_sample_type(name: &str) -> Option<&'static SampleTypeInfo> {
    SAMPLE_TYPES
        .iter()
        .find(|t| t.name == name)
        .or((name == VQA_OCR_SAMPLE.name).then_some(&VQA_OCR_SAMPLE))
}

/// The deprecated top-level dataset classes and the sample type each produces.
pub const LEGACY_CLASSES: &[(&str, &str)] = &[
    ("CaptioningWebdataset", "CaptioningSample"),
    ("ImageWebdataset", "ImageSample"),
    ("ImageClassificationWebdataset", "ImageClassificationSample"),
    ("InterleavedWebdataset", "InterleavedSample"),
    ("MultiChoiceVQAWebdataset", "MultiChoiceVQASample"),
    ("OCRWebdataset", "OCRSample"),
    ("SimilarityInterleavedWebdataset", "SimilarityInterleavedSample"),
    ("TextWebdataset", "TextSample"),
    ("VidQAWebdataset", "VidQASample"),
    ("VQAWebdataset", "VQASample"),
    ("VQAOCRWebdataset", "VQAOCRSample"),
];
