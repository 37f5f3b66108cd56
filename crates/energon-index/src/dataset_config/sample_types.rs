//! The sample types Energon ships, with their fields (for `--sample-type` and `--field-map`
//! validation and the prepare menu).

/// One dataclass field of a sample type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleField {
    /// The field name (a `field_map` key).
    pub name: &'static str,
    /// The type annotation as written in Energon's source (`torch.Tensor`, `Optional[int]`).
    pub type_name: &'static str,
    /// Whether the field has a default (may be left out of a `field_map`).
    pub optional: bool,
    /// The default value as Python prints it (`None`, `0`), for optional fields.
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

const fn req(name: &'static str, type_name: &'static str) -> SampleField {
    SampleField { name, type_name, optional: false, default: None }
}

const fn opt(name: &'static str, type_name: &'static str, default: &'static str) -> SampleField {
    SampleField { name, type_name, optional: true, default: Some(default) }
}

/// The fields of the base `Sample` class, which every sample type inherits.
pub const BASE_FIELDS: &[SampleField] = &[
    req("__key__", "str"),
    req("__restore_key__", "Tuple[Union[str, int, tuple], ...]"),
    opt("__subflavors__", "Optional[Dict[str, Any]]", "None"),
    opt("__sources__", "Optional[tuple[SourceInfo, ...]]", "None"),
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
    SampleTypeInfo {
        name: "CaptioningSample",
        fields: &[req("image", "torch.Tensor"), req("caption", "str")],
    },
    SampleTypeInfo {
        name: "ImageClassificationSample",
        fields: &[
            req("image", "torch.Tensor"),
            opt("label", "Optional[int]", "None"),
            opt("label_name", "Optional[str]", "None"),
        ],
    },
    SampleTypeInfo { name: "ImageSample", fields: &[req("image", "torch.Tensor")] },
    SampleTypeInfo {
        name: "InterleavedSample",
        fields: &[req("sequence", "List[Union[torch.Tensor, str]]")],
    },
    SampleTypeInfo {
        name: "MultiChoiceVQASample",
        fields: &[
            req("image", "torch.Tensor"),
            req("context", "str"),
            opt("choices", "Optional[List[str]]", "None"),
            opt("correct_choice_idx", "int", "0"),
        ],
    },
    SampleTypeInfo {
        name: "OCRSample",
        fields: &[
            req("image", "torch.Tensor"),
            req("text", "str"),
            opt("block_boxes", "Optional[torch.Tensor]", "None"),
            opt("block_classes", "Optional[Union[torch.Tensor, List[str]]]", "None"),
            opt("block_text", "Optional[List[str]]", "None"),
            opt("lines_boxes", "Optional[torch.Tensor]", "None"),
            opt("lines_text", "Optional[List[str]]", "None"),
            opt("words_boxes", "Optional[torch.Tensor]", "None"),
            opt("words_text", "Optional[List[str]]", "None"),
            opt("chars_boxes", "Optional[torch.Tensor]", "None"),
            opt("chars_text", "Optional[List[str]]", "None"),
        ],
    },
    SampleTypeInfo { name: "Sample", fields: &[] },
    SampleTypeInfo {
        name: "SimilarityInterleavedSample",
        fields: &[
            req("images", "List[torch.Tensor]"),
            req("texts", "List[str]"),
            opt("audio", "Optional[List[torch.Tensor]]", "None"),
            opt("video", "Optional[List[torch.Tensor]]", "None"),
            opt("similarity_matrix", "Optional[torch.Tensor]", "None"),
            opt("matched_text_indices", "Optional[List[int]]", "None"),
        ],
    },
    SampleTypeInfo { name: "TextSample", fields: &[req("text", "str")] },
    SampleTypeInfo {
        name: "VQASample",
        fields: &[
            req("image", "torch.Tensor"),
            req("context", "str"),
            opt("answers", "Optional[List[str]]", "None"),
            opt("answer_weights", "Optional[torch.Tensor]", "None"),
        ],
    },
    SampleTypeInfo {
        name: "VidQASample",
        fields: &[
            req("video", "AVDecoder"),
            req("context", "str"),
            opt("answers", "Optional[List[str]]", "None"),
            opt("answer_weights", "Optional[torch.Tensor]", "None"),
        ],
    },
];

/// `VQAOCRSample` is not exported at the top of `megatron.energon` (so it is not in the menu), but
/// the legacy `VQAOCRWebdataset` uses it.
static VQA_OCR_SAMPLE: SampleTypeInfo = SampleTypeInfo {
    name: "VQAOCRSample",
    fields: &[
        req("image", "torch.Tensor"),
        req("context", "str"),
        req("text", "str"),
        opt("answers", "Optional[List[str]]", "None"),
        opt("answer_weights", "Optional[torch.Tensor]", "None"),
        opt("words_boxes", "Optional[torch.Tensor]", "None"),
        opt("words_text", "Optional[List[str]]", "None"),
    ],
};

/// Looks a built-in sample type up by class name (menu types and `VQAOCRSample`).
pub fn sample_type_info(name: &str) -> Option<&'static SampleTypeInfo> {
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
