//! The tar header walker: 512-byte blocks, read the way Python's `tarfile` reads them.
//!
//! What Python does, and therefore what we do (COMPAT(energon 7.4): Python `tarfile`, which
//! megatron-energon uses for prepare and reading):
//! - A header is valid when its checksum field equals the unsigned or the signed byte sum of the
//!   block (with the checksum field counted as spaces); the magic field is not looked at.
//! - Numeric fields are octal text (NUL- or space-terminated, surrounding whitespace allowed) or
//!   base-256 (first byte `0x80`, or `0xff` for negative values).
//! - The ustar `prefix` field is joined to the name (`prefix/name`) for every type except the
//!   GNU types `L`, `K` and `S`, whatever the magic says.
//! - GNU `L`/`K` and PAX `x`/`X` headers describe the next member; the member's `offset` is the
//!   first of them. A GNU long name replaces the name; PAX `path` and `size` replace name and
//!   size (and `size` decides where the next header is). When several apply, the one nearer the
//!   start of the archive wins, since Python applies them from the inside out.
//! - PAX global `g` headers apply `path` and `size` to every later member, but a global `size`
//!   does not move the next header (it only does through a later `x` header), and a `g` header
//!   does not count towards the next member's `offset`, nor need a member after it (like Python,
//!   the walk ends where the data does: a sample range can end with the `g` header that comes
//!   before the next sample).
//! - Data is skipped for regular files and unknown types only; directories, links, devices and
//!   FIFOs never own data blocks, whatever their size field says.
//! - Type `\0` with a name ending in `/` is a directory; directory names lose trailing slashes;
//!   PAX paths lose trailing slashes.
//! - The archive ends at the first all-zero block or at the end of the data.
//!
//! Where Python silently stops (a bad header in the middle of an archive is taken as the end),
//! we return a [`TarError`] naming the offset.

use std::{borrow::Cow, iter::FusedIterator, path::PathBuf};

use crate::Error;

/// Tar block size.
pub(crate) const BLOCK: usize = 512;

/// A malformed header or member found while walking tar data.
///
/// It carries no path because [`members`] walks a byte slice; [`TarError::into_error`] attaches
/// the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("corrupt tar data at byte offset {offset}: {reason}")]
pub struct TarError {
    /// Byte offset (in the file, i.e. including the walk's base offset) of the header at fault.
    pub offset: u64,
    /// What is wrong.
    pub reason: String,
}

impl TarError {
    /// Turns this into the crate's [`Error::CorruptTar`] for the file `path`.
    pub fn into_error(self, path: impl Into<PathBuf>) -> Error {
        Error::CorruptTar { path: path.into(), offset: self.offset, reason: self.reason }
    }
}

/// What kind of member a header describes (Python `TarInfo.type`, grouped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MemberKind {
    /// A regular file: types `0`, `\0` (unless the name ends in `/`), `7` (contiguous) and `S`
    /// (GNU sparse; its stored bytes are reported, see [`TarMember::size`]).
    Regular,
    /// A directory: type `5`, or `\0` with a name ending in `/`.
    Directory,
    /// A hard link (type `1`).
    HardLink,
    /// A symbolic link (type `2`).
    Symlink,
    /// A character device, block device or FIFO (types `3`, `4`, `6`).
    Special,
    /// A type Python does not know; like Python we skip its data blocks and ignore it.
    Unknown,
}

/// One member of a tar archive, with the offsets Python's `tarfile` reports for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TarMember<'a> {
    /// The member name after long-name, PAX and prefix processing. Invalid UTF-8 is replaced
    /// by U+FFFD, see [`TarMember::name_is_lossy`].
    pub name: Cow<'a, str>,
    /// Whether the stored name was not valid UTF-8 (so `name` is not exact).
    pub name_is_lossy: bool,
    /// The kind of member.
    pub kind: MemberKind,
    /// The raw type flag byte of the member header.
    pub typeflag: u8,
    /// Byte offset of the first header block belonging to the member, including GNU long-name
    /// and PAX extended header blocks before it (Python `TarInfo.offset`).
    pub offset: u64,
    /// Byte offset of the member's data (Python `TarInfo.offset_data`).
    pub offset_data: u64,
    /// The size of the member (Python `TarInfo.size`). For GNU sparse members this is the
    /// number of bytes stored in the archive, not the expanded size.
    pub size: u64,
    /// The member's data: `size` bytes at `offset_data` for regular files and unknown types,
    /// empty for the others.
    pub data: &'a [u8],
}

impl TarMember<'_> {
    /// Whether the member is a regular file (Python `TarInfo.isreg()`).
    pub fn is_regular(&self) -> bool {
        self.kind == MemberKind::Regular
    }
}

/// Walks the members of tar data.
///
/// `data` holds tar blocks starting at byte `base_offset` of the file (0 for a whole shard, a
/// sample's start offset for one `[idx[i], idx[i+1])` range); reported offsets are file
/// offsets. The walk ends at the first all-zero block or at the end of `data`, and stops after
/// the first error. PAX global headers before `base_offset` are not seen, as in the reference,
/// which also parses a sample range on its own.
pub fn members(data: &[u8], base_offset: u64) -> Members<'_> {
    Members {
        data,
        base_offset,
        pos: 0,
        running: true,
        global_path: None,
        global_size: None,
        in_range: false,
    }
}

/// The PAX global values (`path`, `size`) in effect at some point of an archive, carried from
/// one walk to another (see [`Members::globals`] and [`Members::with_globals`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PaxGlobals {
    path: Option<(String, bool)>,
    size: Option<u64>,
}

impl PaxGlobals {
    /// Whether no global value is set.
    pub fn is_empty(&self) -> bool {
        self.path.is_none() && self.size.is_none()
    }
}

/// Iterator over tar members, created by [`members`].
#[derive(Debug, Clone)]
pub struct Members<'a> {
    data: &'a [u8],
    base_offset: u64,
    /// Position in `data` of the next header.
    pos: usize,
    running: bool,
    global_path: Option<Name<'a>>,
    global_size: Option<u64>,
    /// Whether `data` is a range of an archive that an index delimits (see
    /// [`Members::in_range`]), not the whole archive.
    in_range: bool,
}

impl<'a> Members<'a> {
    /// Starts the walk with `globals` in effect: those of the archive before `base_offset`,
    /// which a walk of a range of it does not see.
    pub fn with_globals(mut self, globals: &'a PaxGlobals) -> Self {
        if let Some((path, lossy)) = &globals.path {
            self.global_path = Some(Name { text: Cow::Borrowed(path), lossy: *lossy });
        }
        if globals.size.is_some() {
            self.global_size = globals.size;
        }
        self
    }

    /// Marks `data` as a range that an index delimits (a sample's bytes): a member running past
    /// its end is then reported as a range that does not match the archive, not as a file cut
    /// short.
    pub fn in_range(mut self) -> Self {
        self.in_range = true;
        self
    }

    /// Where the data ends, for errors about something running past it.
    fn end_text(&self) -> String {
        if self.in_range {
            format!(
                "the end of the indexed range at byte offset {} (the index does not match the \
                 tar: the shard changed since it was prepared, or its index is stale; run \
                 `energon prepare` again)",
                self.position_of_end()
            )
        } else {
            format!("the end of the file ({} bytes)", self.position_of_end())
        }
    }

    /// The PAX global values in effect after the members walked so far.
    pub fn globals(&self) -> PaxGlobals {
        PaxGlobals {
            path: self.global_path.as_ref().map(|n| (n.text.clone().into_owned(), n.lossy)),
            size: self.global_size,
        }
    }

    /// The file offset just after the last member returned (its padded data), which is where
    /// the walk stopped once the iterator is exhausted: Python's `TarFile.offset` after reading
    /// all members, the start of the end-of-archive blocks.
    pub fn position(&self) -> u64 {
        self.base_offset + self.pos as u64
    }

    fn err(&self, pos: usize, reason: impl Into<String>) -> TarError {
        TarError { offset: self.base_offset + pos as u64, reason: reason.into() }
    }

    /// The padded data blocks of the header at `pos` holding `size` bytes.
    fn blocks_after(&self, pos: usize, size: u64) -> Result<&'a [u8], TarError> {
        let start = pos + BLOCK;
        padded(size)
            .and_then(|n| usize::try_from(n).ok())
            .and_then(|n| self.data.get(start..start.checked_add(n)?))
            .ok_or_else(|| {
                self.err(pos, format!("header data of {size} bytes runs past {}", self.end_text()))
            })
    }

    fn position_of_end(&self) -> u64 {
        self.base_offset + self.data.len() as u64
    }

    /// Reads header blocks from `self.pos` up to and including the next member header.
    fn read_member(&mut self) -> Result<Option<TarMember<'a>>, TarError> {
        let data: &'a [u8] = self.data;
        let mut ext = Extensions::default();
        let mut pos = self.pos;
        loop {
            let Some(block) = data.get(pos..pos + BLOCK) else {
                let rest = &data[pos..];
                if let Some(ext_pos) = ext.last {
                    return Err(self.err(ext_pos, "extension header is not followed by a member"));
                }
                if rest.iter().all(|&b| b == 0) {
                    // The end of the data, or a short run of zeros where the end-of-archive
                    // blocks were cut off: the archive ends here.
                    return Ok(None);
                }
                return Err(self.err(
                    pos,
                    format!("truncated header: {} bytes left, a header needs {BLOCK}", rest.len()),
                ));
            };
            let block: &'a [u8; BLOCK] = block.try_into().expect("the slice has BLOCK bytes");
            if is_zero_block(block) {
                if let Some(ext_pos) = ext.last {
                    return Err(self.err(ext_pos, "extension header is not followed by a member"));
                }
                return Ok(None);
            }
            let header = Header::parse(block).map_err(|reason| self.err(pos, reason))?;
            // Start loading the header after this one (right for regular members, the common
            // case) while this one is processed: the walk is bound by memory latency.
            if let Some(next) = padded(header.size)
                .and_then(|n| usize::try_from(n).ok())
                .and_then(|n| (pos + BLOCK).checked_add(n))
            {
                prefetch(data, next);
            }
            match header.typeflag {
                b'L' | b'K' => {
                    let blocks = self.blocks_after(pos, header.size)?;
                    if header.typeflag == b'L' && ext.name.is_none() {
                        ext.name = Some(Name::decode(nts(blocks)));
                    }
                    ext.first.get_or_insert(pos);
                    ext.last = Some(pos);
                    pos += BLOCK + blocks.len();
                }
                b'x' | b'X' => {
                    let blocks = self.blocks_after(pos, header.size)?;
                    let pax = Pax::parse(blocks).map_err(|reason| self.err(pos, reason))?;
                    // An `x` header applies the global values as of now, then its own.
                    if ext.name.is_none() {
                        ext.name = pax.path.or_else(|| self.global_path.clone());
                    }
                    if ext.size.is_none() {
                        ext.size = pax.size.or(self.global_size);
                    }
                    ext.first.get_or_insert(pos);
                    ext.last = Some(pos);
                    pos += BLOCK + blocks.len();
                }
                b'g' => {
                    let blocks = self.blocks_after(pos, header.size)?;
                    let pax = Pax::parse(blocks).map_err(|reason| self.err(pos, reason))?;
                    if let Some(path) = pax.path {
                        self.global_path = Some(path);
                    }
                    if let Some(size) = pax.size {
                        self.global_size = Some(size);
                    }
                    // A global header describes no member of its own: the data may end after
                    // it, as a sample range `[idx[i], idx[i+1])` does when the header lies
                    // before sample `i + 1` (whose offset it does not count towards).
                    pos += BLOCK + blocks.len();
                }
                _ => return self.finish_member(pos, block, &header, ext).map(Some),
            }
        }
    }

    fn finish_member(
        &mut self,
        pos: usize,
        block: &'a [u8; BLOCK],
        header: &Header,
        ext: Extensions<'a>,
    ) -> Result<TarMember<'a>, TarError> {
        let typeflag = header.typeflag;
        let header_name = nts(&block[..100]);
        let kind = match typeflag {
            b'0' | b'7' | b'S' => MemberKind::Regular,
            b'\0' if header_name.ends_with(b"/") => MemberKind::Directory,
            b'\0' => MemberKind::Regular,
            b'5' => MemberKind::Directory,
            b'1' => MemberKind::HardLink,
            b'2' => MemberKind::Symlink,
            b'3' | b'4' | b'6' => MemberKind::Special,
            _ => MemberKind::Unknown,
        };
        let mut data_start = pos + BLOCK;
        if typeflag == b'S' {
            // Old GNU sparse: more sparse maps follow in extension blocks while the
            // "isextended" byte is set (offset 482 in the header, 504 in extension blocks).
            let mut extended = block[482] != 0;
            while extended {
                let ext_block = self
                    .data
                    .get(data_start..data_start + BLOCK)
                    .ok_or_else(|| self.err(pos, "truncated GNU sparse extension header"))?;
                extended = ext_block[504] != 0;
                data_start += BLOCK;
            }
        }
        // Python applies the globals to the member first (not for sparse members), then the
        // extension headers from the inside out; `ext.name` already holds the outermost one.
        let global_applies = typeflag != b'S';
        let mut name = match ext.name {
            Some(name) => name,
            None => match &self.global_path {
                Some(path) if global_applies => path.clone(),
                _ => {
                    let prefix = nts(&block[345..500]);
                    let gnu_type = matches!(typeflag, b'L' | b'K' | b'S');
                    let header_name = if kind == MemberKind::Directory {
                        trim_trailing_slashes(header_name)
                    } else {
                        header_name
                    };
                    if prefix.is_empty() || gnu_type {
                        Name::decode(header_name)
                    } else {
                        let mut joined = Vec::with_capacity(prefix.len() + 1 + header_name.len());
                        joined.extend_from_slice(prefix);
                        joined.push(b'/');
                        joined.extend_from_slice(header_name);
                        Name::decode_owned(joined)
                    }
                }
            },
        };
        if kind == MemberKind::Directory {
            name.trim_trailing_slashes();
        }
        let header_size = header.size;
        let size = ext.size.or(self.global_size.filter(|_| global_applies)).unwrap_or(header_size);
        let has_data = matches!(kind, MemberKind::Regular | MemberKind::Unknown);
        // Only an `x` header's size moves the next header; a global size alone does not.
        let skip = if !has_data {
            0
        } else {
            padded(ext.size.unwrap_or(header_size))
                .ok_or_else(|| self.err(pos, format!("member size {size} is too large")))?
        };
        let data_len = if has_data { size } else { 0 };
        let end = |n: u64| usize::try_from(n).ok().and_then(|n| data_start.checked_add(n));
        let (Some(next_pos), Some(data_end)) = (end(skip), end(data_len)) else {
            return Err(self.err(pos, format!("member size {size} is too large")));
        };
        if next_pos > self.data.len() || data_end > self.data.len() {
            return Err(self.err(
                pos,
                format!(
                    "member data ({size} bytes at offset {}) runs past {}",
                    self.base_offset + data_start as u64,
                    self.end_text()
                ),
            ));
        }
        self.pos = next_pos;
        Ok(TarMember {
            name: name.text,
            name_is_lossy: name.lossy,
            kind,
            typeflag,
            offset: self.base_offset + ext.first.unwrap_or(pos) as u64,
            offset_data: self.base_offset + data_start as u64,
            size,
            data: &self.data[data_start..data_end],
        })
    }
}

impl<'a> Iterator for Members<'a> {
    type Item = Result<TarMember<'a>, TarError>;

    fn next(&mut self) -> Option<Self::Item> {
        if !self.running {
            return None;
        }
        match self.read_member() {
            Ok(Some(member)) => Some(Ok(member)),
            Ok(None) => {
                self.running = false;
                None
            }
            Err(err) => {
                self.running = false;
                Some(Err(err))
            }
        }
    }
}

impl FusedIterator for Members<'_> {}

/// What the extension headers seen since the previous member say about the next one.
#[derive(Debug, Default)]
struct Extensions<'a> {
    /// Position of the first `L`, `K`, `x` or `X` header (the member's `offset`).
    first: Option<usize>,
    /// Position of the last extension header of any kind (for error messages).
    last: Option<usize>,
    /// The outermost name override (GNU long name or PAX path).
    name: Option<Name<'a>>,
    /// The outermost PAX size override.
    size: Option<u64>,
}

/// A decoded name; `lossy` when the bytes were not valid UTF-8.
#[derive(Debug, Clone)]
struct Name<'a> {
    text: Cow<'a, str>,
    lossy: bool,
}

impl<'a> Name<'a> {
    fn decode(bytes: &'a [u8]) -> Self {
        match std::str::from_utf8(bytes) {
            Ok(text) => Name { text: Cow::Borrowed(text), lossy: false },
            Err(_) => {
                Name { text: Cow::Owned(String::from_utf8_lossy(bytes).into_owned()), lossy: true }
            }
        }
    }

    fn decode_owned(bytes: Vec<u8>) -> Self {
        match String::from_utf8(bytes) {
            Ok(text) => Name { text: Cow::Owned(text), lossy: false },
            Err(err) => Name {
                text: Cow::Owned(String::from_utf8_lossy(err.as_bytes()).into_owned()),
                lossy: true,
            },
        }
    }

    fn trim_trailing_slashes(&mut self) {
        let trimmed_len = self.text.trim_end_matches('/').len();
        if trimmed_len < self.text.len() {
            match &mut self.text {
                Cow::Borrowed(text) => *text = &text[..trimmed_len],
                Cow::Owned(text) => text.truncate(trimmed_len),
            }
        }
    }
}

/// The fields of a header block that decide the layout.
#[derive(Debug)]
struct Header {
    typeflag: u8,
    size: u64,
}

impl Header {
    /// Validates the checksum and every numeric field Python parses, and reads type and size.
    fn parse(block: &[u8; BLOCK]) -> Result<Header, String> {
        let stored = parse_numeric(&block[148..156])
            .ok_or_else(|| "invalid header: bad checksum field".to_owned())?;
        let unsigned = unsigned_checksum(block);
        if stored != i128::from(unsigned) && stored != i128::from(signed_checksum(block, unsigned))
        {
            return Err(format!(
                "header checksum mismatch (stored {stored}, computed {unsigned}); not a tar \
                 header"
            ));
        }
        for (range, field) in [
            (100..108, "mode"),
            (108..116, "uid"),
            (116..124, "gid"),
            (136..148, "mtime"),
            (329..337, "devmajor"),
            (337..345, "devminor"),
        ] {
            if parse_numeric(&block[range]).is_none() {
                return Err(format!("invalid header: bad {field} field"));
            }
        }
        let size = parse_numeric(&block[124..136])
            .ok_or_else(|| "invalid header: bad size field".to_owned())?;
        let size = u64::try_from(size).map_err(|_| format!("invalid header: size {size}"))?;
        Ok(Header { typeflag: block[156], size })
    }
}

/// The unsigned byte sum of a header with its checksum field counted as spaces (Python
/// `calc_chksums`, first value).
fn unsigned_checksum(block: &[u8; BLOCK]) -> u32 {
    // 32 lanes of u16 (at most 16 * 255 each) keep the loop vectorisable.
    let mut lanes = [0u16; 32];
    for chunk in block.chunks_exact(32) {
        for (lane, &b) in lanes.iter_mut().zip(chunk) {
            *lane += u16::from(b);
        }
    }
    let total: u32 = lanes.iter().map(|&l| u32::from(l)).sum();
    let field: u32 = block[148..156].iter().map(|&b| u32::from(b)).sum();
    total - field + 8 * u32::from(b' ')
}

/// The signed variant (bytes read as `i8`), which some old writers stored.
fn signed_checksum(block: &[u8; BLOCK], unsigned: u32) -> i64 {
    let high = block.iter().filter(|&&b| b >= 0x80).count()
        - block[148..156].iter().filter(|&&b| b >= 0x80).count();
    i64::from(unsigned) - 256 * high as i64
}

fn is_zero_block(block: &[u8; BLOCK]) -> bool {
    // A real header has a non-zero checksum field, so this rejects it after one word.
    block[148..156].iter().all(|&b| b == 0) && block.iter().all(|&b| b == 0)
}

/// Parses a numeric header field like Python's `tarfile.nti`.
///
/// Base-256 when the first byte is `0x80` (or `0xff`, negative); otherwise ASCII text up to the
/// first NUL, surrounding whitespace stripped, empty meaning 0, read as Python's `int(s, 8)`
/// reads it (sign, `0o` prefix and digit-separating underscores allowed).
pub(crate) fn parse_numeric(field: &[u8]) -> Option<i128> {
    if let Some(n) = parse_plain_octal(field) {
        return Some(n);
    }
    if let Some((&first, rest)) = field.split_first()
        && (first == 0x80 || first == 0xff)
    {
        // At most 11 value bytes (88 bits): fits.
        let mut n: i128 = 0;
        for &b in rest {
            n = (n << 8) | i128::from(b);
        }
        if first == 0xff {
            n -= 1i128 << (8 * rest.len());
        }
        return Some(n);
    }
    let text = nts(field);
    if !text.is_ascii() {
        return None;
    }
    let text = trim_python_space_end(trim_python_space_start(text));
    if text.is_empty() {
        return Some(0);
    }
    parse_python_octal(text)
}

/// The common spelling of a numeric field, fast: octal digits from the first byte, then
/// nothing, a NUL (after which anything goes), or spaces up to the end or a NUL. `None` means
/// "not this spelling", not "invalid".
fn parse_plain_octal(field: &[u8]) -> Option<i128> {
    let mut n: i128 = 0;
    let mut i = 0;
    while i < field.len() && (b'0'..=b'7').contains(&field[i]) {
        n = (n << 3) | i128::from(field[i] - b'0');
        i += 1;
    }
    if i == 0 {
        return None;
    }
    while i < field.len() && field[i] == b' ' {
        i += 1;
    }
    (i == field.len() || field[i] == 0).then_some(n)
}

/// Python `int(text, 8)` for a stripped, non-empty ASCII string.
fn parse_python_octal(text: &[u8]) -> Option<i128> {
    let (negative, text) = match text.split_first()? {
        (b'-', rest) => (true, rest),
        (b'+', rest) => (false, rest),
        _ => (false, text),
    };
    // After a `0o` prefix one underscore may follow directly (`0o_7`).
    let (text, underscore_ok) = match text {
        [b'0', b'o' | b'O', rest @ ..] => (rest, true),
        _ => (text, false),
    };
    let mut n: i128 = 0;
    let mut n_digits = 0usize;
    let mut prev_underscore = false;
    for (i, &b) in text.iter().enumerate() {
        match b {
            b'0'..=b'7' => {
                n = n.checked_mul(8)?.checked_add(i128::from(b - b'0'))?;
                n_digits += 1;
                prev_underscore = false;
            }
            b'_' if !prev_underscore && (i > 0 || underscore_ok) => prev_underscore = true,
            _ => return None,
        }
    }
    if n_digits == 0 || prev_underscore {
        return None;
    }
    Some(if negative { -n } else { n })
}

/// Whitespace as Python's `str.strip()` sees it within ASCII.
fn is_python_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c | 0x1c..=0x1f)
}

fn trim_python_space_start(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s
        && is_python_space(*first)
    {
        s = rest;
    }
    s
}

fn trim_python_space_end(mut s: &[u8]) -> &[u8] {
    while let [rest @ .., last] = s
        && is_python_space(*last)
    {
        s = rest;
    }
    s
}

/// The bytes up to the first NUL (Python `nts`).
fn nts(bytes: &[u8]) -> &[u8] {
    bytes.iter().position(|&b| b == 0).map_or(bytes, |n| &bytes[..n])
}

fn trim_trailing_slashes(mut bytes: &[u8]) -> &[u8] {
    while let [rest @ .., b'/'] = bytes {
        bytes = rest;
    }
    bytes
}

/// Hints the CPU to load `data[pos..pos + BLOCK]` into the cache.
#[inline(always)]
fn prefetch(data: &[u8], pos: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(block) = data.get(pos..pos + BLOCK) {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // A header spans 8 cache lines; the first four hold every field the walk reads first.
        for line in [0, 64, 128, 192, 320] {
            // SAFETY: a prefetch never faults and has no effect on program state; the address is
            // inside `data` anyway.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(block[line..].as_ptr().cast()) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (data, pos);
}

/// `size` rounded up to whole blocks.
fn padded(size: u64) -> Option<u64> {
    Some(size.checked_add(BLOCK as u64 - 1)? & !(BLOCK as u64 - 1))
}

/// The records of a PAX header that matter for the layout.
#[derive(Debug, Default)]
struct Pax<'a> {
    path: Option<Name<'a>>,
    size: Option<u64>,
}

impl<'a> Pax<'a> {
    /// Parses `"<len> <keyword>=<value>\n"` records up to the end of the blocks or the first NUL,
    /// with the framing checks of current Python (length at least 5, record inside the blocks,
    /// ending in a newline, non-empty keyword); later records win.
    fn parse(blocks: &'a [u8]) -> Result<Pax<'a>, String> {
        let mut res = Pax::default();
        let mut pos = 0;
        while pos < blocks.len() && blocks[pos] != 0 {
            let record = &blocks[pos..];
            let n_digits = record.iter().take(21).take_while(|b| b.is_ascii_digit()).count();
            let bad = |what: &str| format!("invalid pax header record at byte {pos}: {what}");
            if n_digits == 0 || n_digits > 20 || record.get(n_digits) != Some(&b' ') {
                return Err(bad("no length"));
            }
            let length: usize = std::str::from_utf8(&record[..n_digits])
                .expect("ASCII digits")
                .parse()
                .map_err(|_| bad("length too large"))?;
            if length < 5 || length > record.len() || length <= n_digits + 1 {
                return Err(bad("bad length"));
            }
            if record[length - 1] != b'\n' {
                return Err(bad("record does not end with a newline"));
            }
            let body = &record[n_digits + 1..length - 1];
            let eq = body.iter().position(|&b| b == b'=').ok_or_else(|| bad("no '='"))?;
            let (keyword, value) = (&body[..eq], &body[eq + 1..]);
            if keyword.is_empty() {
                return Err(bad("empty keyword"));
            }
            match keyword {
                b"path" => {
                    let mut path = Name::decode(value);
                    path.trim_trailing_slashes();
                    res.path = Some(path);
                }
                b"size" => res.size = Some(parse_pax_size(value).ok_or_else(|| bad("bad size"))?),
                _ if keyword.starts_with(b"GNU.sparse.") => {
                    return Err("pax GNU sparse members are not supported".to_owned());
                }
                _ => {}
            }
            pos += length;
        }
        Ok(res)
    }
}

/// A PAX `size` value: decimal digits, surrounding whitespace allowed.
fn parse_pax_size(value: &[u8]) -> Option<u64> {
    let digits = trim_python_space_end(trim_python_space_start(value));
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}
