//! Loading a metadataset and its nested files, with every reference checked.

use std::{
    fs,
    path::{Path, PathBuf},
    sync::Arc,
};

use energon_index::{
    INDEX_SQLITE, INFO_JSON, INFO_YAML, NV_META,
    discover::{DatasetKind, classify},
    storage,
};
use energon_reader::{FileStore, SystemFileStore, WebdatasetFileStore};

use super::{FileMap, MAX_NESTING, Metadataset, folder_of, resolve_written};
use crate::{
    error::{Error, Result},
    grammar::{AuxSpec, DatasetRef, Item, MetadatasetFile, Node, Version, parse_metadataset},
};

/// A named auxiliary source of a leaf, handed to cookers for lookups by file name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuxSource {
    /// A prepared WebDataset (read by key through its `.nv-meta/index.sqlite`).
    Dataset(PathBuf),
    /// A plain folder (files read by relative path).
    Folder(PathBuf),
}

impl AuxSource {
    /// The dataset or folder path.
    pub fn path(&self) -> &Path {
        match self {
            AuxSource::Dataset(p) | AuxSource::Folder(p) => p,
        }
    }

    /// Opens the source as a file store for cookers: a prepared dataset's members by entry name
    /// (`<key>.<part>`, located through its `index.sqlite`), or a folder's files by relative path.
    pub fn open(&self) -> Result<Arc<dyn FileStore>> {
        Ok(match self {
            AuxSource::Dataset(path) => Arc::new(WebdatasetFileStore::open(path)?),
            AuxSource::Folder(path) => Arc::new(SystemFileStore::new(path)),
        })
    }
}

/// What a `path:` reference points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// A nested metadataset file.
    Metadataset,
    /// A prepared WebDataset folder.
    WebDataset,
    /// A JSONL file.
    Jsonl,
}

pub(super) fn load(root: &Path) -> Result<Metadataset> {
    let mut loader = Loader { files: FileMap::new(), stack: Vec::new() };
    let root = loader.load_file(root, None)?;
    Ok(Metadataset { root, files: loader.files })
}

struct Loader {
    files: FileMap,
    /// The files being checked, outermost first (normalized, canonical) for cycle detection.
    stack: Vec<(PathBuf, PathBuf)>,
}

impl Loader {
    fn load_file(
        &mut self,
        path: &Path,
        referenced_from: Option<(&Path, &str)>,
    ) -> Result<Arc<MetadatasetFile>> {
        let canonical = fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
        if let Some(pos) = self.stack.iter().position(|(_, c)| *c == canonical) {
            let mut chain: Vec<String> =
                self.stack[pos..].iter().map(|(p, _)| p.display().to_string()).collect();
            chain.push(path.display().to_string());
            let (file, yaml_path) = referenced_from.unwrap_or((path, ""));
            return Err(Error::Cycle {
                file: file.to_owned(),
                yaml_path: yaml_path.to_owned(),
                chain: chain.join(" -> "),
            });
        }
        if let Some(file) = self.files.get(path) {
            return Ok(Arc::clone(file));
        }
        if self.stack.len() >= MAX_NESTING {
            let (file, yaml_path) = referenced_from.unwrap_or((path, ""));
            let root = self.stack.first().map_or(path, |(p, _)| p.as_path());
            return Err(Error::TooDeep {
                file: file.to_owned(),
                yaml_path: yaml_path.to_owned(),
                root: root.to_owned(),
                limit: MAX_NESTING,
            });
        }
        let file = Arc::new(parse_metadataset(path)?);
        self.stack.push((path.to_owned(), canonical));
        for (_, node) in &file.splits {
            self.check_node(&file, node)?;
        }
        self.stack.pop();
        self.files.insert(path.to_owned(), Arc::clone(&file));
        Ok(file)
    }

    fn check_node(&mut self, file: &MetadatasetFile, node: &Node) -> Result<()> {
        match node {
            Node::Blend(blend) => {
                for item in &blend.items {
                    self.check_item(file, &item.item)?;
                }
            }
            Node::BlendEpochized(blend) => {
                for item in &blend.items {
                    self.check_item(file, &item.item)?;
                }
            }
            Node::Join(join) => {
                for source in &join.sources {
                    let path = target_path(file, &source.dataset)?;
                    let kind = classify(&path).ok();
                    if kind != Some(DatasetKind::WebDataset) {
                        return Err(bad_path(
                            file,
                            &source.dataset,
                            path,
                            "a joined dataset must be a prepared WebDataset folder".to_owned(),
                        ));
                    }
                }
            }
            Node::Ref(dataset) => self.check_ref(file, dataset)?,
        }
        Ok(())
    }

    fn check_item(&mut self, file: &MetadatasetFile, item: &Item) -> Result<()> {
        match item {
            Item::Ref(dataset) => self.check_ref(file, dataset),
            Item::Join(join) => self.check_node(file, &Node::Join(join.clone())),
        }
    }

    fn check_ref(&mut self, file: &MetadatasetFile, dataset: &DatasetRef) -> Result<()> {
        let path = target_path(file, dataset)?;
        match target_kind(file, dataset, &path)? {
            Target::Metadataset => {
                for (key, set) in [
                    ("aux", !dataset.aux.is_empty()),
                    ("dataset_config", dataset.dataset_config.is_some()),
                    ("split_config", dataset.split_config.is_some()),
                ] {
                    if set {
                        return Err(Error::BadNode {
                            file: file.path.clone(),
                            yaml_path: format!("{}.{key}", dataset.yaml_path),
                            reason: format!(
                                "{key} cannot be set on a reference to a nested metadataset"
                            ),
                        });
                    }
                }
                self.load_file(&path, Some((&file.path, &dataset.yaml_path)))?;
            }
            Target::Jsonl => {
                for (key, set) in [
                    ("dataset_config", dataset.dataset_config.is_some()),
                    ("split_config", dataset.split_config.is_some()),
                ] {
                    if set {
                        return Err(Error::BadNode {
                            file: file.path.clone(),
                            yaml_path: format!("{}.{key}", dataset.yaml_path),
                            reason: format!("{key} cannot be set for a JSONL dataset"),
                        });
                    }
                }
                resolve_aux(file, dataset)?;
            }
            Target::WebDataset => {
                resolve_aux(file, dataset)?;
            }
        }
        Ok(())
    }
}

/// The resolved `path:` of a reference.
pub(crate) fn target_path(file: &MetadatasetFile, dataset: &DatasetRef) -> Result<PathBuf> {
    resolve_written(folder_of(&file.path), &dataset.path).map_err(|reason| Error::BadPath {
        file: file.path.clone(),
        yaml_path: format!("{}.path", dataset.yaml_path),
        path: PathBuf::from(&dataset.path),
        reason,
    })
}

fn bad_path(file: &MetadatasetFile, dataset: &DatasetRef, path: PathBuf, reason: String) -> Error {
    Error::BadPath {
        file: file.path.clone(),
        yaml_path: format!("{}.path", dataset.yaml_path),
        path,
        reason,
    }
}

/// What `path` (the resolved `path:` of `dataset`) is, as the reference's class of `dataset`
/// decides.
pub(crate) fn target_kind(
    file: &MetadatasetFile,
    dataset: &DatasetRef,
    path: &Path,
) -> Result<Target> {
    let bad = |reason: &str| Err(bad_path(file, dataset, path.to_owned(), reason.to_owned()));
    if dataset.version == Version::V1 {
        // COMPAT(energon 7.4.1): metadataset.py:DatasetReference.post_initialize (any file is a
        // nested metadataset, a folder must hold dataset info).
        if storage::is_file(path) {
            let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
            if name.ends_with(".jsonl") {
                return bad(
                    "a V1 metadataset (class Metadataset) cannot reference a JSONL file; use \
                     MetadatasetV2",
                );
            }
            return Ok(Target::Metadataset);
        }
        let meta = path.join(NV_META);
        if storage::is_file(&meta.join(INFO_JSON)) || storage::is_file(&meta.join(INFO_YAML)) {
            return Ok(Target::WebDataset);
        }
        return bad("no such prepared dataset (no .nv-meta/.info.json) or metadataset file");
    }
    match classify(path) {
        Ok(DatasetKind::Metadataset) => Ok(Target::Metadataset),
        Ok(DatasetKind::WebDataset) => Ok(Target::WebDataset),
        Ok(DatasetKind::Jsonl) => Ok(Target::Jsonl),
        Ok(DatasetKind::Filesystem) => bad(
            "an auxiliary media folder (index.sqlite without .info.json) can only be used as aux",
        ),
        Ok(DatasetKind::Folder) => bad(
            "not a prepared dataset (no .nv-meta/.info.json); did you forget `energon prepare`?",
        ),
        Err(energon_index::Error::NotADataset { reason, .. }) => bad(&reason),
        Err(err) => Err(err.into()),
    }
}

/// Where an `aux:` entry points, resolved against `base` without looking: whether it is a plain
/// folder, and its path. Errors: the path as written and why it cannot be resolved.
pub(crate) fn aux_target(base: &Path, spec: &AuxSpec) -> Result<(bool, PathBuf), (String, String)> {
    let (is_folder, written): (bool, std::borrow::Cow<'_, str>) = match spec {
        AuxSpec::Dataset(p) => (false, p.as_str().into()),
        AuxSpec::Filesystem(p) => (true, p.as_str().into()),
        AuxSpec::Str(s) => match s.split_once("://") {
            // COMPAT(energon 7.4.1): metadataset_v2.py:_normalize_aux_reference
            // (`filesystem://<path>` is a plain folder, relative or absolute, and
            // `filesystem+SCHEME://<url>` a plain folder at `SCHEME://<url>`).
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("filesystem") => {
                (true, rest.into())
            }
            Some((scheme, rest))
                if scheme.len() > 11
                    && scheme.get(..11).is_some_and(|p| p.eq_ignore_ascii_case("filesystem+")) =>
            {
                (true, format!("{}://{rest}", &scheme[11..]).into())
            }
            _ => (false, s.as_str().into()),
        },
    };
    let path = resolve_written(base, &written).map_err(|r| (written.clone().into_owned(), r))?;
    Ok((is_folder, path))
}

/// The `aux:` entries of `dataset`, resolved and checked: a prepared dataset must have an
/// `index.sqlite`, a folder must exist.
pub(crate) fn resolve_aux(
    file: &MetadatasetFile,
    dataset: &DatasetRef,
) -> Result<Vec<(String, AuxSource)>> {
    let base = folder_of(&file.path);
    let mut res = Vec::with_capacity(dataset.aux.len());
    for (name, spec) in &dataset.aux {
        let yaml_path = format!("{}.aux.{name}", dataset.yaml_path);
        let bad = |path: PathBuf, reason: String| Error::BadPath {
            file: file.path.clone(),
            yaml_path: yaml_path.clone(),
            path,
            reason,
        };
        let (is_folder, path) =
            aux_target(base, spec).map_err(|(written, r)| bad(PathBuf::from(written), r))?;
        if is_folder {
            if !storage::is_dir(&path) {
                return Err(bad(path, "no such folder".to_owned()));
            }
            res.push((name.clone(), AuxSource::Folder(path)));
        } else {
            if storage::is_file(&path) {
                return Err(bad(
                    path,
                    "an auxiliary dataset must be a prepared dataset folder, not a file".to_owned(),
                ));
            }
            if !storage::is_file(&path.join(NV_META).join(INDEX_SQLITE)) {
                return Err(bad(
                    path,
                    "not a prepared dataset (no .nv-meta/index.sqlite); prepare it, or write \
                     filesystem://<folder> for a plain folder"
                        .to_owned(),
                ));
            }
            res.push((name.clone(), AuxSource::Dataset(path)));
        }
    }
    Ok(res)
}
