//! Property tests: archives written by the `tar` crate, re-read independently.

use std::io::Cursor;

use proptest::prelude::*;
use tar::{EntryType, Header};

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
    Symlink,
}

#[derive(Debug, Clone, Copy)]
enum Format {
    Ustar,
    Gnu,
    /// A PAX `path` record carries the name; the header holds a dummy name.
    PaxPath,
    /// Like `PaxPath`, plus a PAX `size` record while the header says size 0.
    PaxPathSize,
}

#[derive(Debug, Clone)]
struct Spec {
    name: String,
    kind: Kind,
    size: usize,
    format: Format,
}

fn component() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z0-9_é][a-z0-9_.é]{0,7}",
        1 => "[a-z]{40,120}",
        1 => Just("__meta__".to_owned()),
    ]
    .prop_filter("no . or .. components", |c| c != "." && c != "..")
}

/// A sample key: up to three directories, then a basename without dots.
fn key() -> impl Strategy<Value = String> {
    (proptest::collection::vec(component(), 0..3), "[a-z0-9_é]{1,10}|[a-z]{90,110}").prop_map(
        |(dirs, base)| {
            let mut key = dirs.join("/");
            if !key.is_empty() {
                key.push('/');
            }
            key + &base
        },
    )
}

fn format() -> impl Strategy<Value = Format> {
    prop_oneof![
        Just(Format::Ustar),
        Just(Format::Gnu),
        Just(Format::PaxPath),
        Just(Format::PaxPathSize)
    ]
}

/// Members built from a small pool of keys, so samples span consecutive members and keys
/// come back later; mixed with directories, links, `__meta__` files and names that do not split.
fn specs() -> impl Strategy<Value = Vec<Spec>> {
    let member =
        (0..12u8, 0..5usize, "[a-z]{0,4}(\\.[a-z]{1,3})?", 0..3000usize, format(), component());
    (proptest::collection::vec(key(), 5), proptest::collection::vec(member, 1..40)).prop_map(
        |(keys, members)| {
            members
                .into_iter()
                .map(|(choice, key_idx, ext, size, format, extra)| {
                    let key = &keys[key_idx];
                    let (name, kind) = match choice {
                        0..=6 => (format!("{key}.{ext}"), Kind::File),
                        7 => (format!("{key}/"), Kind::Dir),
                        8 => (format!("__meta__/{key}.json"), Kind::File),
                        9 => (format!("{key}.lnk"), Kind::Symlink),
                        10 => (extra, Kind::File),
                        _ => (format!("{extra}/.{ext}x"), Kind::File),
                    };
                    let size = if kind == Kind::File { size } else { 0 };
                    Spec { name, kind, size, format }
                })
                .collect()
        },
    )
}

fn build(specs: &[Spec]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (i, spec) in specs.iter().enumerate() {
        let data: Vec<u8> = (0..spec.size).map(|j| (i + j) as u8).collect();
        let mut header = match spec.format {
            Format::Ustar => Header::new_ustar(),
            _ => Header::new_gnu(),
        };
        header.set_mode(0o644);
        header.set_size(spec.size as u64);
        header.set_entry_type(match spec.kind {
            Kind::File => EntryType::Regular,
            Kind::Dir => EntryType::Directory,
            Kind::Symlink => EntryType::Symlink,
        });
        match (spec.kind, spec.format) {
            (Kind::Symlink, _) => {
                let target = format!("{}/target-{i}", "t".repeat(i * 7 % 130));
                builder.append_link(&mut header, &spec.name, target).unwrap();
            }
            (_, Format::Ustar | Format::Gnu) => {
                builder.append_data(&mut header, &spec.name, data.as_slice()).unwrap();
            }
            (_, Format::PaxPath | Format::PaxPathSize) => {
                let size = spec.size.to_string();
                let mut records = vec![("path", spec.name.as_bytes())];
                if matches!(spec.format, Format::PaxPathSize) {
                    records.push(("size", size.as_bytes()));
                    header.set_size(0);
                }
                builder.append_pax_extensions(records).unwrap();
                header.set_path(format!("pax-dummy-{i}")).unwrap();
                header.set_cksum();
                builder.append(&header, data.as_slice()).unwrap();
            }
        }
    }
    builder.into_inner().unwrap()
}

/// What the `tar` crate reports for one member.
#[derive(Debug, PartialEq, Eq)]
struct Observed {
    name: String,
    kind: MemberKind,
    offset: u64,
    offset_data: u64,
    size: u64,
}

/// Re-reads the archive with the `tar` crate. Between two members there are only extension
/// headers, so a member's Python offset is where the previous member's padded data ended.
fn reread(data: &[u8], specs: &[Spec]) -> Vec<Observed> {
    let mut archive = tar::Archive::new(Cursor::new(data));
    let mut prev_end = 0;
    let mut res = Vec::new();
    for (entry, spec) in archive.entries().unwrap().zip(specs) {
        let entry = entry.unwrap();
        let header_pos = entry.raw_header_position();
        assert!(header_pos >= prev_end);
        let size = entry.size();
        let kind = match entry.header().entry_type() {
            EntryType::Regular => MemberKind::Regular,
            EntryType::Directory => MemberKind::Directory,
            EntryType::Symlink => MemberKind::Symlink,
            other => panic!("unexpected {other:?}"),
        };
        let path = String::from_utf8(entry.path_bytes().into_owned()).unwrap();
        assert_eq!(path, spec.name);
        res.push(Observed {
            name: spec.name.trim_end_matches('/').to_owned(),
            kind,
            offset: prev_end,
            offset_data: entry.raw_file_position(),
            size,
        });
        prev_end = entry.raw_file_position() + size.next_multiple_of(512);
    }
    assert_eq!(res.len(), specs.len());
    res
}

/// The grouping rule written plainly with the reference's regular expressions.
/// (key, offset, parts as (name, offset_data, size)).
type ModelSample = (String, u64, Vec<(String, u64, u64)>);

fn model_samples(observed: &[Observed]) -> Vec<ModelSample> {
    let split = regex::Regex::new(r"^((?:.*/|)[^.]+)[.]([^/]*)$").unwrap();
    let skip = regex::Regex::new(r"^__[^/]*__($|/)").unwrap();
    let mut res: Vec<ModelSample> = Vec::new();
    for m in observed.iter().filter(|m| m.kind == MemberKind::Regular && !skip.is_match(&m.name)) {
        let Some(caps) = split.captures(&m.name) else { continue };
        let (key, part) = (caps[1].to_owned(), caps[2].to_owned());
        if res.last().is_none_or(|s| s.0 != key) {
            res.push((key, m.offset, Vec::new()));
        }
        res.last_mut().unwrap().2.push((part, m.offset_data, m.size));
    }
    res
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn members_match_tar_crate(specs in specs()) {
        let data = build(&specs);
        let expected = reread(&data, &specs);
        let mut walk = members(&data, 0);
        let ours: Vec<Observed> = walk
            .by_ref()
            .map(|m| {
                let m = m.unwrap();
                Observed { name: m.name.into_owned(), kind: m.kind, offset: m.offset, offset_data: m.offset_data, size: m.size }
            })
            .collect();
        prop_assert_eq!(&ours, &expected);
        // `tar::Builder` ends the archive with two zero blocks.
        prop_assert_eq!(walk.position(), data.len() as u64 - 1024);
        for m in members(&data, 0) {
            let m = m.unwrap();
            if m.is_regular() {
                let start = m.offset_data as usize;
                prop_assert_eq!(m.data, &data[start..start + m.size as usize]);
            }
        }
    }

    #[test]
    fn grouping_matches_model(specs in specs()) {
        let data = build(&specs);
        let model = model_samples(&reread(&data, &specs));
        match scan_bytes(Path::new("p.tar"), &data) {
            Ok(scan) => {
                let ours: Vec<_> = scan
                    .samples
                    .iter()
                    .map(|s| {
                        let parts = s.parts.iter().map(|p| (p.name.clone(), p.offset_data, p.size)).collect();
                        (s.key.clone(), s.offset, parts)
                    })
                    .collect();
                prop_assert_eq!(ours, model);
                prop_assert_eq!(scan.end_offset, data.len() as u64 - 1024);
            }
            Err(Error::EmptyShard { .. }) => prop_assert!(model.is_empty()),
            Err(err) => prop_assert!(false, "unexpected error {err}"),
        }
    }

    /// Cutting an archive anywhere gives a typed result, never a panic, and never more
    /// samples than the whole archive.
    #[test]
    fn truncation_never_panics(specs in specs(), cut in 0.0..1.0f64) {
        let data = build(&specs);
        let cut = (data.len() as f64 * cut) as usize;
        let whole = scan_bytes(Path::new("p.tar"), &data).map(|s| s.samples.len()).unwrap_or(0);
        match scan_bytes(Path::new("p.tar"), &data[..cut]) {
            Ok(scan) => prop_assert!(scan.samples.len() <= whole),
            Err(Error::CorruptTar { offset, .. }) => prop_assert!(offset < cut as u64),
            Err(Error::EmptyShard { .. }) => {}
            Err(err) => prop_assert!(false, "unexpected error {err}"),
        }
    }
}
