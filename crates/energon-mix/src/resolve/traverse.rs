//! Listing the leaves of a split without opening or checking them (the reference's
//! `traverse_metadataset`): a leaf whose dataset or aux source is missing is listed too.

use std::path::{Path, PathBuf};

use energon_index::storage;
use serde_json::{Map, Value};

use super::{
    MAX_NESTING, TraversedLeaf, absolute, folder_of,
    load::{aux_target, target_path},
    tree::{merge_subflavors, split_of},
};
use crate::{
    error::{Error, Result},
    grammar::{DatasetRef, Item, MetadatasetFile, Node, parse_metadataset},
};

/// The leaves of split `split_part` of the metadataset at `path`, nested metadatasets
/// flattened, in tree order. Each file is parsed strictly; paths are resolved without looking,
/// except to tell a nested metadataset (an existing `.yaml` file) from a dataset. Joins are not
/// supported, as in the reference (an error).
pub fn traverse(path: &Path, split_part: &str) -> Result<Vec<TraversedLeaf>> {
    let root = absolute(path);
    let mut walk = Walk { root: root.clone(), leaves: Vec::new() };
    walk.file(&root, split_part, None, 0)?;
    Ok(walk.leaves)
}

struct Walk {
    root: PathBuf,
    leaves: Vec<TraversedLeaf>,
}

impl Walk {
    fn file(
        &mut self,
        path: &Path,
        split_part: &str,
        inherited: Option<&Map<String, Value>>,
        depth: usize,
    ) -> Result<()> {
        let file = parse_metadataset(path)?;
        let node = split_of(&file, split_part)?;
        let items: Vec<&Item> = match node {
            Node::Ref(dataset) => {
                return self.reference(&file, dataset, split_part, inherited, depth);
            }
            Node::Join(join) => return Err(no_joins(&file, &join.yaml_path)),
            Node::Blend(blend) => blend.items.iter().map(|i| &i.item).collect(),
            Node::BlendEpochized(blend) => blend.items.iter().map(|i| &i.item).collect(),
        };
        for item in items {
            match item {
                Item::Ref(dataset) => {
                    self.reference(&file, dataset, split_part, inherited, depth)?;
                }
                Item::Join(join) => return Err(no_joins(&file, &join.yaml_path)),
            }
        }
        Ok(())
    }

    fn reference(
        &mut self,
        file: &MetadatasetFile,
        dataset: &DatasetRef,
        split_part: &str,
        inherited: Option<&Map<String, Value>>,
        depth: usize,
    ) -> Result<()> {
        let path = target_path(file, dataset)?;
        let subflavors = merge_subflavors(dataset.subflavors.as_ref(), inherited);
        let split_part = dataset.split_part.as_deref().unwrap_or(split_part);
        let is_yaml = path.extension().is_some_and(|e| e == "yaml");
        if is_yaml && storage::is_file(&path) {
            if depth + 1 >= MAX_NESTING {
                return Err(Error::TooDeep {
                    file: file.path.clone(),
                    yaml_path: dataset.yaml_path.clone(),
                    root: self.root.clone(),
                    limit: MAX_NESTING,
                });
            }
            return self.file(&path, split_part, subflavors.as_ref(), depth + 1);
        }
        let base = folder_of(&file.path);
        let mut aux = Vec::with_capacity(dataset.aux.len());
        for (name, spec) in &dataset.aux {
            let (_, target) =
                aux_target(base, spec).map_err(|(written, reason)| Error::BadPath {
                    file: file.path.clone(),
                    yaml_path: format!("{}.aux.{name}", dataset.yaml_path),
                    path: written.into(),
                    reason,
                })?;
            aux.push((name.clone(), target));
        }
        let split_part = split_part.to_owned();
        let subflavors = subflavors.unwrap_or_default();
        self.leaves.push(TraversedLeaf { path, split_part, aux, subflavors });
        Ok(())
    }
}

fn no_joins(file: &MetadatasetFile, yaml_path: &str) -> Error {
    Error::BadNode {
        file: file.path.clone(),
        yaml_path: yaml_path.to_owned(),
        reason: "traversal does not support joined datasets".to_owned(),
    }
}
