//! Unit tests for the tar scanner on hand-built archives, and golden tests on the fixture.

use std::{fs, path::PathBuf};

use super::*;

/// Builds tar archives block by block, so tests control every byte.
#[derive(Default)]
pub(super) struct TarBuf(pub(super) Vec<u8>);

impl TarBuf {
    pub(super) fn pos(&self) -> u64 {
        self.0.len() as u64
    }

    /// Appends a header block; returns its offset.
    pub(super) fn header(&mut self, block: [u8; 512]) -> u64 {
        let at = self.pos();
        self.0.extend_from_slice(&block);
        at
    }

    /// Appends data padded to whole blocks; returns its offset.
    pub(super) fn data(&mut self, data: &[u8]) -> u64 {
        let at = self.pos();
        self.0.extend_from_slice(data);
        self.0.resize(self.0.len().next_multiple_of(512), 0);
        at
    }

    /// Appends a regular file; returns (offset, offset_data).
    pub(super) fn file(&mut self, name: &str, data: &[u8]) -> (u64, u64) {
        let at = self.header(raw_header(name.as_bytes(), b'0', data.len() as u64));
        (at, self.data(data))
    }

    /// Appends an extension header (`L`, `K`, `x`, `g`) with its data; returns its offset.
    pub(super) fn extension(&mut self, typeflag: u8, data: &[u8]) -> u64 {
        let at = self.header(raw_header(b"././@LongLink", typeflag, data.len() as u64));
        self.data(data);
        at
    }

    pub(super) fn finish(mut self) -> Vec<u8> {
        self.0.extend_from_slice(&[0; 1024]);
        self.0
    }
}

/// A ustar header block with a valid checksum.
pub(super) fn raw_header(name: &[u8], typeflag: u8, size: u64) -> [u8; 512] {
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name);
    put_octal(&mut h[100..108], 0o644);
    put_octal(&mut h[108..116], 0);
    put_octal(&mut h[116..124], 0);
    put_octal(&mut h[124..136], size);
    put_octal(&mut h[136..148], 0);
    h[156] = typeflag;
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    fix_checksum(&mut h);
    h
}

fn put_octal(field: &mut [u8], value: u64) {
    let text = format!("{:0width$o}\0", value, width = field.len() - 1);
    field.copy_from_slice(text.as_bytes());
}

/// Recomputes the (unsigned) checksum after a test edited a header.
pub(super) fn fix_checksum(h: &mut [u8; 512]) {
    h[148..156].fill(b' ');
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
}

/// PAX records `"<len> <key>=<value>\n"`.
pub(super) fn pax_records(records: &[(&str, &[u8])]) -> Vec<u8> {
    let mut res = Vec::new();
    for (key, value) in records {
        let body_len = 1 + key.len() + 1 + value.len() + 1;
        let mut len = body_len + 1;
        while len.to_string().len() + body_len != len {
            len = len.to_string().len() + body_len;
        }
        res.extend_from_slice(format!("{len} {key}=").as_bytes());
        res.extend_from_slice(value);
        res.push(b'\n');
    }
    res
}

fn path() -> PathBuf {
    PathBuf::from("shard.tar")
}

fn all_members(data: &[u8]) -> Vec<TarMember<'_>> {
    members(data, 0).collect::<Result<Vec<_>, _>>().unwrap()
}

#[track_caller]
fn corrupt(data: &[u8]) -> (u64, String) {
    match scan_bytes(&path(), data) {
        Err(Error::CorruptTar { offset, reason, .. }) => (offset, reason),
        other => panic!("expected CorruptTar, got {other:?}"),
    }
}

#[test]
fn plain_members_and_grouping() {
    let mut tar = TarBuf::default();
    let (a0, a0_data) = tar.file("a.jpg", &[1; 700]);
    let (_, a1_data) = tar.file("a.txt", b"hi");
    tar.header(raw_header(b"dir/", b'5', 0));
    tar.file("__meta__/x.json", b"{}");
    let (_, a2_data) = tar.file("a.seg.png", b"");
    let (b0, _) = tar.file("sub/b.txt", b"b");
    tar.file("noext", b"x");
    let (a_again, _) = tar.file("a.jpg", b"again");
    let end = tar.pos();
    let data = tar.finish();

    let scan = scan_bytes(&path(), &data).unwrap();
    let keys: Vec<_> = scan.samples.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(keys, ["a", "sub/b", "a"]);
    assert_eq!(scan.offsets(), [a0, b0, a_again, end]);
    assert_eq!(scan.end_offset, end);
    let a = &scan.samples[0];
    let parts: Vec<_> = a.parts.iter().map(|p| (p.name.as_str(), p.offset_data, p.size)).collect();
    assert_eq!(parts, [("jpg", a0_data, 700), ("txt", a1_data, 2), ("seg.png", a2_data, 0)]);
    assert_eq!(scan.byte_size(0), b0 - a0);
}

#[test]
fn ustar_prefix_is_joined() {
    let mut tar = TarBuf::default();
    let mut h = raw_header(b"0001.jpg", b'0', 3);
    h[345..353].copy_from_slice(b"some/dir");
    fix_checksum(&mut h);
    tar.header(h);
    tar.data(b"abc");
    let data = tar.finish();
    let m = all_members(&data);
    assert_eq!(m[0].name, "some/dir/0001.jpg");
    assert_eq!(m[0].data, b"abc");
}

#[test]
fn gnu_long_name_counts_towards_offset() {
    let long = format!("{}/{}.jpg", "d".repeat(120), "k".repeat(30));
    let mut tar = TarBuf::default();
    tar.file("first.txt", b"1");
    let l_at = tar.extension(b'L', format!("{long}\0").as_bytes());
    tar.extension(b'K', b"ignored-link-target\0");
    tar.header(raw_header(&long.as_bytes()[..100], b'0', 5));
    let data_at = tar.data(b"12345");
    let data = tar.finish();
    let m = all_members(&data);
    assert_eq!(m.len(), 2);
    assert_eq!((m[1].name.as_ref(), m[1].offset, m[1].offset_data), (long.as_str(), l_at, data_at));
    assert_eq!(m[1].data, b"12345");
}

#[test]
fn pax_path_and_size_override_the_header() {
    let mut tar = TarBuf::default();
    let x_at = tar.extension(
        b'x',
        &pax_records(&[("mtime", b"1.5"), ("path", b"p/0001.txt/"), ("size", b"700")]),
    );
    // The header says size 0; the PAX size decides where the next header is.
    tar.header(raw_header(b"dummy", b'0', 0));
    let data_at = tar.data(&[7; 700]);
    let (next, _) = tar.file("p/0002.txt", b"x");
    let data = tar.finish();
    let m = all_members(&data);
    assert_eq!(
        (m[0].name.as_ref(), m[0].offset, m[0].offset_data, m[0].size),
        ("p/0001.txt", x_at, data_at, 700)
    );
    assert_eq!(m[1].offset, next);
}

#[test]
fn outermost_extension_wins() {
    let mut tar = TarBuf::default();
    let first = tar.extension(b'L', b"from-long-name.txt\0");
    tar.extension(b'x', &pax_records(&[("path", b"from-pax.txt")]));
    tar.header(raw_header(b"header.txt", b'0', 1));
    tar.data(b"1");
    let data = tar.finish();
    let m = all_members(&data);
    assert_eq!((m[0].name.as_ref(), m[0].offset), ("from-long-name.txt", first));
}

#[test]
fn pax_global_header_applies_to_later_members_but_not_to_offsets() {
    let mut tar = TarBuf::default();
    tar.extension(b'g', &pax_records(&[("comment", b"hello")]));
    let (first, _) = tar.file("a.txt", b"1");
    tar.extension(b'g', &pax_records(&[("path", b"renamed.txt"), ("size", b"1")]));
    // The global size replaces the member size but the header size still moves to the next
    // header (COMPAT: Python tarfile).
    let (second, second_data) = tar.file("b.txt", &[9; 600]);
    let data = tar.finish();
    let m = all_members(&data);
    assert_eq!((m[0].name.as_ref(), m[0].offset), ("a.txt", first));
    assert_eq!(
        (m[1].name.as_ref(), m[1].offset, m[1].offset_data, m[1].size),
        ("renamed.txt", second, second_data, 1)
    );
    assert_eq!(m[1].data, [9]);
}

#[test]
fn a_range_walked_with_the_globals_before_it_names_members_as_the_whole_walk() {
    let mut tar = TarBuf::default();
    tar.extension(b'g', &pax_records(&[("path", b"renamed.txt")]));
    let (first, _) = tar.file("a.txt", b"1");
    let data = tar.finish();
    let mut head = members(&data[..first as usize], 0);
    assert!(head.next().is_none());
    let globals = head.globals();
    assert!(!globals.is_empty());
    let range = &data[first as usize..];
    let plain: Vec<_> = members(range, first).collect::<Result<_, _>>().unwrap();
    assert_eq!(plain[0].name, "a.txt");
    let with: Vec<_> =
        members(range, first).with_globals(&globals).collect::<Result<_, _>>().unwrap();
    assert_eq!(with, all_members(&data));
    assert_eq!(with[0].name, "renamed.txt");
    assert!(members(&data, 0).globals().is_empty());
}

#[test]
fn a_member_past_an_indexed_range_says_the_index_does_not_match() {
    let mut tar = TarBuf::default();
    tar.file("a.txt", &[7; 600]);
    let data = tar.finish();
    let whole = members(&data[..1024], 0).next().unwrap().unwrap_err();
    assert!(whole.reason.contains("the end of the file (1024 bytes)"), "{}", whole.reason);
    let ranged = members(&data[..1024], 0).in_range().next().unwrap().unwrap_err();
    assert!(ranged.reason.contains("indexed range at byte offset 1024"), "{}", ranged.reason);
    assert!(ranged.reason.contains("run `energon prepare` again"), "{}", ranged.reason);
}

#[test]
fn base256_size_and_signed_checksum() {
    let mut tar = TarBuf::default();
    let mut h = raw_header(b"a.bin", b'0', 0);
    h[124..136].copy_from_slice(&[0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x00]);
    // A high byte (here in the user name) makes signed and unsigned sums differ; store the
    // signed one.
    h[265] = 0xe9;
    h[148..156].fill(b' ');
    let signed: i32 = h.iter().map(|&b| i32::from(b as i8)).sum();
    h[148..156].copy_from_slice(format!("{signed:06o}\0 ").as_bytes());
    tar.header(h);
    tar.data(&[1; 256]);
    let data = tar.finish();
    let m = all_members(&data);
    assert_eq!(m[0].size, 256);
}

#[test]
fn non_regular_members_own_no_data() {
    let mut tar = TarBuf::default();
    // Python never skips data for directories and links, whatever their size field says.
    tar.header(raw_header(b"d/", b'5', 512));
    let (f, _) = tar.file("d/a.txt", b"x");
    tar.header(raw_header(b"old-style-dir/", b'\0', 0));
    tar.header(raw_header(b"link", b'2', 0));
    // Unknown types are skipped like files.
    tar.header(raw_header(b"volume", b'V', 10));
    tar.data(&[1; 10]);
    let (g, _) = tar.file("d/b.txt", b"y");
    let data = tar.finish();
    let m = all_members(&data);
    let kinds: Vec<_> = m.iter().map(|m| (m.name.as_ref(), m.kind)).collect();
    assert_eq!(
        kinds,
        [
            ("d", MemberKind::Directory),
            ("d/a.txt", MemberKind::Regular),
            ("old-style-dir", MemberKind::Directory),
            ("link", MemberKind::Symlink),
            ("volume", MemberKind::Unknown),
            ("d/b.txt", MemberKind::Regular),
        ]
    );
    assert_eq!((m[1].offset, m[5].offset), (f, g));
    assert_eq!(m[0].size, 512);
    assert!(m[0].data.is_empty());
}

#[test]
fn gnu_sparse_member_reports_stored_bytes() {
    let mut tar = TarBuf::default();
    let mut h = raw_header(b"s.bin", b'S', 3);
    h[482] = 1; // one extension block follows
    fix_checksum(&mut h);
    let at = tar.header(h);
    tar.header(sparse_extension_block());
    let data_at = tar.data(b"abc");
    let data = tar.finish();
    let m = all_members(&data);
    assert_eq!(
        (m[0].kind, m[0].offset, m[0].offset_data, m[0].size),
        (MemberKind::Regular, at, data_at, 3)
    );
}

/// A GNU sparse extension block with one map entry and no further extension.
fn sparse_extension_block() -> [u8; 512] {
    let mut block = [0; 512];
    block[..12].copy_from_slice(b"00000000000\0");
    block[12..24].copy_from_slice(b"00000000003\0");
    block
}

#[test]
fn members_of_a_range_report_file_offsets() {
    let mut tar = TarBuf::default();
    tar.file("a.txt", b"1");
    let (b, b_data) = tar.file("b.txt", b"22");
    let (c, _) = tar.file("c.txt", b"333");
    let data = tar.finish();
    let range = &data[b as usize..c as usize];
    let m: Vec<_> = members(range, b).collect::<Result<_, _>>().unwrap();
    assert_eq!(m.len(), 1);
    assert_eq!(
        (m[0].name.as_ref(), m[0].offset, m[0].offset_data, m[0].data),
        ("b.txt", b, b_data, &b"22"[..])
    );
    let mut walk = members(range, b);
    assert!(walk.by_ref().all(|m| m.is_ok()));
    assert_eq!(walk.position(), c);
}

#[test]
fn archive_without_end_blocks_or_with_a_cut_zero_tail_is_fine() {
    let mut tar = TarBuf::default();
    tar.file("a.txt", b"1");
    let end = tar.pos();
    let mut data = tar.0;
    assert_eq!(scan_bytes(&path(), &data).unwrap().end_offset, end);
    data.extend_from_slice(&[0; 100]);
    assert_eq!(scan_bytes(&path(), &data).unwrap().end_offset, end);
}

#[test]
fn truncated_data_is_an_error() {
    let mut tar = TarBuf::default();
    tar.file("a.txt", b"1");
    let (b, _) = tar.file("b.txt", &[1; 1000]);
    let data = &tar.0[..tar.0.len() - 600];
    let (offset, reason) = corrupt(data);
    assert_eq!(offset, b);
    assert!(reason.contains("runs past the end"), "{reason}");
}

#[test]
fn truncated_header_is_an_error() {
    let mut tar = TarBuf::default();
    tar.file("a.txt", b"1");
    let at = tar.header(raw_header(b"b.txt", b'0', 0));
    let data = &tar.0[..at as usize + 300];
    let (offset, reason) = corrupt(data);
    assert_eq!(offset, at);
    assert!(reason.contains("truncated header"), "{reason}");
}

#[test]
fn bad_checksum_in_the_middle_is_an_error() {
    let mut tar = TarBuf::default();
    tar.file("a.txt", b"1");
    let (b, _) = tar.file("b.txt", b"2");
    tar.file("c.txt", b"3");
    let mut data = tar.finish();
    data[b as usize + 3] ^= 0x55;
    let (offset, reason) = corrupt(&data);
    assert_eq!(offset, b);
    assert!(reason.contains("checksum"), "{reason}");
}

#[test]
fn invalid_numeric_field_is_an_error() {
    let mut tar = TarBuf::default();
    let mut h = raw_header(b"a.txt", b'0', 0);
    h[124..136].copy_from_slice(b"0000000009x\0");
    fix_checksum(&mut h);
    tar.header(h);
    let (offset, reason) = corrupt(&tar.finish());
    assert_eq!(offset, 0);
    assert!(reason.contains("size"), "{reason}");
}

#[test]
fn numeric_fields_parse_like_python() {
    use super::header::parse_numeric;
    assert_eq!(parse_numeric(b"0000644\0"), Some(0o644));
    assert_eq!(parse_numeric(b" 644 \0\0"), Some(0o644));
    assert_eq!(parse_numeric(b"\0\0\0\0"), Some(0));
    assert_eq!(parse_numeric(b"        "), Some(0));
    assert_eq!(parse_numeric(b"0o1_7\0"), Some(0o17));
    assert_eq!(parse_numeric(b"-7\0"), Some(-7));
    assert_eq!(parse_numeric(&[0xff; 8]), Some(-1));
    assert_eq!(parse_numeric(&[0x80, 0, 0, 0, 0, 0, 1, 0]), Some(256));
    assert_eq!(parse_numeric(b"0o_7"), Some(7));
    assert_eq!(parse_numeric(b"+7"), Some(7));
    assert_eq!(parse_numeric(b"\x1c7\x1f"), Some(7));
    for bad in [&b"8\0"[..], b"1__2", b"_1", b"1_", b"0x10", b"12 34", b"\xe9"] {
        assert_eq!(parse_numeric(bad), None, "{bad:?}");
    }
}

#[test]
fn bad_pax_record_is_an_error() {
    let mut tar = TarBuf::default();
    let x = tar.extension(b'x', b"12 path=a.txt");
    tar.file("b.txt", b"1");
    let (offset, reason) = corrupt(&tar.finish());
    assert_eq!(offset, x);
    assert!(reason.contains("pax"), "{reason}");
}

#[test]
fn extension_header_at_the_end_is_an_error() {
    let mut tar = TarBuf::default();
    tar.file("a.txt", b"1");
    let l_at = tar.extension(b'L', b"long.txt\0");
    let (offset, reason) = corrupt(&tar.finish());
    assert_eq!(offset, l_at);
    assert!(reason.contains("not followed by a member"), "{reason}");

    // A global header describes no member: data ending after one ends cleanly (a sample range
    // whose next sample starts after a global header).
    let mut tar = TarBuf::default();
    tar.file("a.txt", b"1");
    let g_at = tar.extension(b'g', &pax_records(&[("comment", b"hello")]));
    let data = tar.finish();
    let range = &data[..g_at as usize + 1024];
    let names: Vec<String> = members(range, 0).map(|m| m.unwrap().name.into_owned()).collect();
    assert_eq!(names, ["a.txt"]);
}

#[test]
fn gzip_file_is_compressed_tar() {
    let data = [0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3];
    assert!(matches!(scan_bytes(&path(), &data), Err(Error::CompressedTar { .. })));
    let mut xz = vec![0xfd, b'7', b'z', b'X', b'Z', 0];
    xz.resize(1024, 7);
    let (_, reason) = corrupt(&xz);
    assert!(reason.contains("xz"), "{reason}");
}

#[test]
fn empty_inputs_are_empty_shards() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.tar");
    fs::write(&empty, b"").unwrap();
    assert!(matches!(scan_shard(&empty), Err(Error::EmptyShard { .. })));
    assert!(matches!(scan_bytes(&path(), &[0; 10240]), Err(Error::EmptyShard { .. })));

    let mut tar = TarBuf::default();
    tar.header(raw_header(b"dir/", b'5', 0));
    tar.file("__meta__/x.json", b"{}");
    tar.file("README", b"no dot");
    tar.file("x.y/.hidden", b"");
    assert!(matches!(scan_bytes(&path(), &tar.finish()), Err(Error::EmptyShard { .. })));
    let missing = dir.path().join("missing.tar");
    assert!(matches!(scan_shard(&missing), Err(Error::Io { op: "cannot open", .. })));
}

#[test]
fn invalid_utf8_is_an_error_only_for_sample_members() {
    let mut tar = TarBuf::default();
    tar.header(raw_header(b"d\xff/", b'5', 0));
    tar.file("a.txt", b"1");
    let ok = tar.finish();
    assert_eq!(scan_bytes(&path(), &ok).unwrap().samples.len(), 1);

    let mut tar = TarBuf::default();
    tar.file("a.txt", b"1");
    let bad = tar.header(raw_header(b"b\xff.txt", b'0', 0));
    let (offset, reason) = corrupt(&tar.finish());
    assert_eq!(offset, bad);
    assert!(reason.contains("UTF-8"), "{reason}");
}

#[test]
fn scan_shard_reads_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let shard = dir.path().join("s.tar");
    let mut tar = TarBuf::default();
    tar.file("k.txt", b"hello");
    fs::write(&shard, tar.finish()).unwrap();
    let scan = scan_shard(&shard).unwrap();
    assert_eq!(scan.samples[0].key, "k");
    assert_eq!(scan.offsets(), [0, 1024]);
}

fn fixture() -> PathBuf {
    energon_fixtures::ref_small_dir()
}

/// The fixture's shards in `tar_file_id` order (the order of `.info.json`).
fn fixture_shards() -> Vec<String> {
    let info: serde_json::Value =
        serde_json::from_slice(&fs::read(fixture().join(".nv-meta/.info.json")).unwrap()).unwrap();
    info["shard_counts"].as_object().unwrap().keys().cloned().collect()
}

#[test]
fn golden_tar_idx_equals_reference() {
    let shards = fixture_shards();
    assert_eq!(shards.len(), 4);
    for shard in shards {
        let path = fixture().join(&shard);
        let scan = scan_shard(&path).unwrap();
        let expected = fs::read(fixture().join(format!("{shard}.idx"))).unwrap();
        let ours: Vec<u8> = scan.offsets().iter().flat_map(|o| o.to_le_bytes()).collect();
        assert_eq!(ours, expected, "{shard}");
        assert_eq!(scan.samples.len(), 50);
    }
}

#[cfg(feature = "sqlite")]
#[test]
fn golden_sqlite_rows_equal_reference() {
    use rusqlite::{Connection, OpenFlags};
    let db = fixture().join(".nv-meta/index.sqlite");
    let uri = format!("file:{}?immutable=1", db.display());
    let conn = Connection::open_with_flags(
        uri,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
    )
    .unwrap();
    type PartRow = (i64, i64, String, i64, i64);
    let mut stmt = conn
        .prepare(
            "SELECT tar_file_id, sample_index, part_name, content_byte_offset, content_byte_size \
             FROM sample_parts ORDER BY tar_file_id, sample_index, content_byte_offset",
        )
        .unwrap();
    let expected_parts: Vec<PartRow> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    type SampleRow = (i64, String, i64, i64, i64);
    let mut stmt = conn
        .prepare(
            "SELECT tar_file_id, sample_key, sample_index, byte_offset, byte_size \
             FROM samples ORDER BY tar_file_id, sample_index",
        )
        .unwrap();
    let expected_samples: Vec<SampleRow> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();

    let mut parts: Vec<PartRow> = Vec::new();
    let mut samples: Vec<SampleRow> = Vec::new();
    for (tar_id, shard) in fixture_shards().iter().enumerate() {
        let scan = scan_shard(&fixture().join(shard)).unwrap();
        let tar_id = tar_id as i64;
        for (i, sample) in scan.samples.iter().enumerate() {
            let size = scan.byte_size(i) as i64;
            samples.push((tar_id, sample.key.clone(), i as i64, sample.offset as i64, size));
            for p in &sample.parts {
                parts.push((tar_id, i as i64, p.name.clone(), p.offset_data as i64, p.size as i64));
            }
        }
    }
    assert_eq!(parts.len(), 600);
    assert_eq!(parts, expected_parts);
    assert_eq!(samples, expected_samples);
}

/// Numbers from Python `tarfile` on the same bytes: a global `size` reaches the member through
/// the later `x` header, which also moves the next header.
#[test]
fn pax_global_size_applied_through_local_header() {
    let mut tar = TarBuf::default();
    tar.extension(b'g', &pax_records(&[("size", b"3")]));
    tar.extension(b'x', &pax_records(&[("mtime", b"1")]));
    tar.file("a.txt", b"12345");
    tar.file("b.txt", &[1; 1000]);
    let data = tar.finish();
    let mut walk = members(&data, 0);
    let m: Vec<_> = walk.by_ref().map(Result::unwrap).collect();
    let got: Vec<_> =
        m.iter().map(|m| (m.name.as_ref(), m.offset, m.offset_data, m.size)).collect();
    assert_eq!(got, [("a.txt", 1024, 2560, 3), ("b.txt", 3072, 3584, 3)]);
    assert_eq!(walk.position(), 4608);
}

/// Numbers from Python `tarfile`: a long name filling its block exactly has no NUL and is
/// taken whole.
#[test]
fn long_name_filling_its_block() {
    let long = format!("{}.txt", "n".repeat(508));
    let mut tar = TarBuf::default();
    tar.extension(b'L', long.as_bytes());
    tar.file("short", b"1");
    let data = tar.finish();
    let m = all_members(&data);
    assert_eq!((m[0].name.as_ref(), m[0].offset, m[0].offset_data), (long.as_str(), 0, 1536));
}

#[test]
fn unsupported_or_invalid_pax_values_are_errors() {
    for records in [&[("GNU.sparse.major", &b"1"[..])][..], &[("size", b"12x")], &[("size", b"-1")]]
    {
        let mut tar = TarBuf::default();
        let x = tar.extension(b'x', &pax_records(records));
        tar.file("a.txt", b"1");
        let (offset, reason) = corrupt(&tar.finish());
        assert_eq!(offset, x);
        assert!(reason.contains("pax"), "{reason}");
    }
}

#[test]
fn the_trailer_tells_a_cut_shard_and_an_appended_archive() {
    use crate::shard::Trailer;

    let archive = || {
        let mut t = TarBuf(Vec::new());
        t.file("a.txt", b"1");
        t.file("b.txt", b"2");
        t
    };
    let complete = archive().finish();
    let scan = scan_bytes(&path(), &complete).unwrap();
    assert_eq!(scan.trailer, Trailer::Complete);
    assert_eq!(scan.trailer.problem(), None);
    // Cut at a member boundary: no end-of-archive marker.
    let cut = &complete[..scan.end_offset as usize];
    let cut_scan = scan_bytes(&path(), cut).unwrap();
    assert_eq!(cut_scan.trailer, Trailer::Missing);
    assert_eq!(cut_scan.samples, scan.samples);
    assert!(cut_scan.trailer.problem().unwrap().contains("no end-of-archive marker"));
    // Only part of the marker.
    let short = &complete[..scan.end_offset as usize + 512];
    assert_eq!(scan_bytes(&path(), short).unwrap().trailer, Trailer::Missing);
    // A second archive after the first one's marker: not indexed, and said.
    let mut appended = complete.clone();
    let second_at = appended.len() as u64;
    appended.extend(archive().finish());
    let appended_scan = scan_bytes(&path(), &appended).unwrap();
    assert_eq!(appended_scan.samples, scan.samples);
    assert_eq!(appended_scan.trailer, Trailer::DataAfter { offset: second_at });
    assert!(appended_scan.trailer.problem().unwrap().contains(&format!("offset {second_at}")));
}
