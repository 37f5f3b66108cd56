//! YAML as Energon reads and writes it.
//!
//! Reading follows Energon's `eyaml` loader (rapidyaml plus a custom scalar caster), not YAML 1.2:
//! unquoted `yes`/`no` are booleans, `1e3` is a float, mapping keys are always strings, and quoted
//! scalars are never cast. The result is a [`serde_json::Value`] (with `preserve_order`), so callers
//! can use serde on it.
//!
//! Writing follows PyYAML's `yaml.dump`, which is what `energon prepare` uses for `split.yaml`,
//! `dataset.yaml` and the legacy `.info.yaml`; [`dump_yaml`] output is byte-identical to it.

mod emit;
mod load;
pub(crate) mod pynum;
mod resolve;
#[cfg(test)]
mod tests;

pub use emit::{DumpOptions, dump_yaml};
pub use load::{cast_plain_scalar, load_yaml, load_yaml_or_json, parse_yaml};
pub(crate) use load::{parse_json, read_text};
