//! `.nv-meta/index.sqlite` (the SQLite sample index) and `.nv-meta/index.uuid`.
//!
//! - [`SqliteIndexWriter`] builds a new `index.sqlite` during `prepare`, with the schema of
//!   megatron-energon 7.4 (same `CREATE` text, same index names), tuned for one bulk load.
//! - [`SqliteIndex`] opens an existing index read-only (`mode=ro&immutable=1`) and answers the
//!   lookups Energon makes: sample by key, part by entry name, listings, counts, media metadata.
//!   It reads the 6.x, 7.0-7.2 and 7.3+ layouts ([`SchemaVersion`]).
//! - [`write_index_uuid`] / [`read_index_uuid`]: the random UUID that names one preparation run
//!   (the cache key of metadataset join indexes).
//! - [`dump_canonical`]: a diffable text form of a whole database, used by golden tests.
//!
//! The main sequential loader never reads this database (it uses `.info.json`, `split.yaml` and
//! the `.tar.idx` files); it serves random access by key, `mount`, joins and media metadata.

mod dump;
mod index_uuid;
mod reader;
pub(crate) mod schema;
mod writer;

#[cfg(test)]
mod tests;

pub use dump::dump_canonical;
pub use index_uuid::{new_index_uuid, read_index_uuid, write_index_uuid};
pub use reader::{
    EntryInfo, MediaMetadata, PartLocation, PartRow, SampleLocation, SampleRow, SchemaVersion,
    SqliteIndex,
};
pub use writer::SqliteIndexWriter;
