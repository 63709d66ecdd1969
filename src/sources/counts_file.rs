//! The counts file: [`CorpusCounts`] saved compactly, versioned and checksummed, the same counts always
//! giving the same bytes.
//!
//! Layout (version 1): the 8 bytes `BPCOUNTS`, the version as a little-endian u32, then one zstd frame
//! with its content checksum, which holds, as LEB128 varints:
//!
//! - the documents, the records skipped, the bytes of text and the special-token occurrences;
//! - the number of special tokens, then each as its length and its UTF-8 bytes, in the order given;
//! - the number of distinct pre-tokens, then each in byte order as the length of the prefix it shares
//!   with the one before, the length of the rest, the rest, and its count.
//!
//! Sorted pre-tokens share long prefixes, and zstd takes what is left: 12.5 M distinct pre-tokens
//! of web text fit in about 4 bytes each. Nothing depends on hash order, so merging the same shards in
//! any order gives the same file. Reading checks everything a damaged file could break: the magic, the
//! version, the checksum, that the pre-tokens are distinct, sorted and counted at least once, and that
//! nothing follows the frame. The messages of skipped records are not saved.
//!
//! The transfer form ([`CorpusCounts::to_transfer`]) is what counts are moved between processes in
//! (pickling, Ray's tasks): the same fields, the messages of skipped records too, and the pre-tokens in
//! the map's own order, each as its length, its bytes and its count, uncompressed, the whole followed by
//! its CRC-32. Sorting and compressing cost many times what adding the counts to others costs; the
//! transfer form is written in a walk of the map and read at the cost of that addition, for a few times
//! the bytes (benchmarks/README.md has the figures). It is checked as the file
//! is (magic, version, checksum, every length in bounds, no count 0, no more occurrences than bytes),
//! but is no format to keep: its version may change with any release.

use std::io::{self, BufRead, ErrorKind, Read, Write};

use super::count::CorpusCounts;
use crate::error::{try_reserve, Error, Result};
use crate::train::{coprime_step, PreTokenCounts};

/// The first bytes of every counts file.
const MAGIC: &[u8; 8] = b"BPCOUNTS";

/// The version this code writes and reads.
const VERSION: u32 = 1;

/// The first bytes of the transfer form.
const TRANSFER_MAGIC: &[u8; 8] = b"BPCMOVED";

/// The version of the transfer form this code writes and reads.
const TRANSFER_VERSION: u32 = 1;

/// Pre-tokens of the transfer form added to the map a run at a time, the runs in a scrambled order
/// (see `add_transfer`).
const BLOCK: usize = 16;

/// The zstd level: fast, and within a few percent of the size of much slower levels on sorted counts.
const LEVEL: i32 = 3;

/// A growing buffer that reports out of memory as an error, where `Vec`'s `Write` would abort.
struct Buffer(Vec<u8>);

impl Write for Buffer {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        try_reserve(&mut self.0, bytes.len())
            .map_err(|_| io::Error::from(ErrorKind::OutOfMemory))?;
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn put_varint(out: &mut impl Write, mut n: u64) -> io::Result<()> {
    let mut bytes = [0u8; 10];
    let mut len = 0;
    loop {
        let low = (n & 0x7f) as u8;
        n >>= 7;
        bytes[len] = low | if n > 0 { 0x80 } else { 0 };
        len += 1;
        if n == 0 {
            return out.write_all(&bytes[..len]);
        }
    }
}

impl CorpusCounts {
    /// The counts file of these counts (see the module `sources::counts_file`), in memory: a few
    /// bytes a distinct pre-token.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        counts_to_bytes(self)
    }

    /// The counts of the counts file `data`; `name` (its path, or what the data is) starts the
    /// errors: a foreign file, one written by a newer bytepair, a truncated or corrupt one.
    pub fn from_bytes(data: &[u8], name: &str) -> Result<CorpusCounts> {
        counts_from_bytes(data, name)
    }

    /// The transfer form of these counts (see the module `sources::counts_file`): the map walked.
    pub fn to_transfer(&self) -> Result<Vec<u8>> {
        counts_to_transfer(self)
    }

    /// The counts of the transfer form `data`; `name` (what the data is) starts the errors.
    pub fn from_transfer(data: &[u8], name: &str) -> Result<CorpusCounts> {
        let mut counts = CorpusCounts::new()?;
        counts.update_from_transfer(data, name)?;
        Ok(counts)
    }

    /// Adds the counts of the transfer form `data` to these, as [`CorpusCounts::update`] adds counts,
    /// without making a map of them first; `name` (what the data is) starts the errors. Fails, changing
    /// nothing, when the data is bad or [`CorpusCounts::update`] would fail; when memory runs out, with
    /// part of them added.
    pub fn update_from_transfer(&mut self, data: &[u8], name: &str) -> Result<()> {
        let body = transfer_body(data, name)?;
        let transfer = read_transfer(body).map_err(|e| e.named(name))?;
        self.update(&transfer.totals)?;
        add_transfer(body, &transfer, self.pretokens_mut()).map_err(|e| e.named(name))
    }
}

/// The error of writing `what` (a form of the counts) into memory.
fn write_failed(what: &'static str) -> impl Fn(io::Error) -> Error + Copy {
    move |e: io::Error| match e.kind() {
        ErrorKind::OutOfMemory => Error::OutOfMemory {
            what,
            bytes: 0,
            text: None,
        },
        _ => Error::InvalidCounts(format!("could not write {what}: {e}")),
    }
}

fn counts_to_bytes(counts: &CorpusCounts) -> Result<Vec<u8>> {
    let failed = write_failed("the counts file");
    let mut out = Buffer(Vec::new());
    out.write_all(MAGIC).map_err(failed)?;
    out.write_all(&VERSION.to_le_bytes()).map_err(failed)?;
    let mut zstd = zstd::stream::write::Encoder::new(out, LEVEL).map_err(failed)?;
    zstd.include_checksum(true).map_err(failed)?;
    put_header(&mut zstd, counts).map_err(failed)?;
    let mut previous: Vec<u8> = Vec::new();
    let mut written = Ok(());
    counts.pretokens().for_each_sorted(|piece, count| {
        if written.is_ok() {
            written = put_entry(&mut zstd, &mut previous, piece, count);
        }
    })?;
    written.map_err(failed)?;
    Ok(zstd.finish().map_err(failed)?.0)
}

fn counts_to_transfer(counts: &CorpusCounts) -> Result<Vec<u8>> {
    let failed = write_failed("the counts' transfer form");
    let mut out = Buffer(Vec::new());
    out.write_all(TRANSFER_MAGIC).map_err(failed)?;
    out.write_all(&TRANSFER_VERSION.to_le_bytes())
        .map_err(failed)?;
    put_header(&mut out, counts).map_err(failed)?;
    let messages = counts.skipped_errors();
    put_varint(&mut out, messages.len() as u64).map_err(failed)?;
    for m in messages {
        put_varint(&mut out, m.len() as u64).map_err(failed)?;
        out.write_all(m.as_bytes()).map_err(failed)?;
    }
    let mut written = Ok(());
    counts.pretokens().for_each(|piece, count| {
        if written.is_ok() {
            written = put_varint(&mut out, piece.len() as u64)
                .and_then(|()| out.write_all(piece))
                .and_then(|()| put_varint(&mut out, count));
        }
    });
    written.map_err(failed)?;
    let checksum = crc32fast::hash(&out.0);
    out.write_all(&checksum.to_le_bytes()).map_err(failed)?;
    Ok(out.0)
}

/// The totals and the special tokens, then the number of pre-tokens.
fn put_header(out: &mut impl Write, counts: &CorpusCounts) -> io::Result<()> {
    let pretokens = counts.pretokens();
    for n in [
        counts.documents(),
        counts.skipped(),
        pretokens.bytes(),
        pretokens.special_occurrences(),
    ] {
        put_varint(out, n)?;
    }
    let tokens = counts.special_tokens().unwrap_or_default();
    put_varint(out, tokens.len() as u64)?;
    for t in tokens {
        put_varint(out, t.len() as u64)?;
        out.write_all(t.as_bytes())?;
    }
    put_varint(out, pretokens.len() as u64)
}

/// One pre-token and its count, after `previous`, which becomes `piece`.
fn put_entry(
    out: &mut impl Write,
    previous: &mut Vec<u8>,
    piece: &[u8],
    count: u64,
) -> io::Result<()> {
    let shared = piece
        .iter()
        .zip(previous.iter())
        .take_while(|(a, b)| a == b)
        .count();
    put_varint(out, shared as u64)?;
    put_varint(out, (piece.len() - shared) as u64)?;
    out.write_all(&piece[shared..])?;
    put_varint(out, count)?;
    previous.truncate(shared);
    try_reserve(previous, piece.len() - shared)
        .map_err(|_| io::Error::from(ErrorKind::OutOfMemory))?;
    previous.extend_from_slice(&piece[shared..]);
    Ok(())
}

/// Reads the varints and bytes of a counts file's frame, any failure the reason the file is bad.
struct Fields<R> {
    reader: R,
}

/// Why a counts file is bad, or out of memory.
enum Bad {
    Why(String),
    OutOfMemory(usize),
}

impl From<io::Error> for Bad {
    fn from(e: io::Error) -> Bad {
        match e.kind() {
            ErrorKind::UnexpectedEof => Bad::Why("the file is truncated".to_string()),
            _ => Bad::Why(format!("the file is corrupt ({e})")),
        }
    }
}

impl Bad {
    /// The error of the counts `name` that are bad this way.
    fn named(self, name: &str) -> Error {
        match self {
            Bad::Why(why) => Error::BadCountsFile {
                name: name.to_string(),
                why,
            },
            Bad::OutOfMemory(bytes) => Error::OutOfMemory {
                what: "the counts read",
                bytes,
                text: None,
            },
        }
    }
}

fn corrupt(what: &str) -> Bad {
    Bad::Why(format!("the file is corrupt ({what})"))
}

/// What `put_header` writes.
struct Header {
    documents: u64,
    skipped: u64,
    bytes: u64,
    special_occurrences: u64,
    tokens: Vec<String>,
    /// The number of distinct pre-tokens that follow.
    pretokens: u64,
}

impl<R: BufRead> Fields<R> {
    fn header(&mut self) -> std::result::Result<Header, Bad> {
        let documents = self.varint()?;
        let skipped = self.varint()?;
        let bytes = self.varint()?;
        let special_occurrences = self.varint()?;
        let mut tokens = Vec::new();
        for _ in 0..self.varint()? {
            tokens.push(self.string("a special token")?);
        }
        Ok(Header {
            documents,
            skipped,
            bytes,
            special_occurrences,
            tokens,
            pretokens: self.varint()?,
        })
    }

    /// A length and that many bytes of UTF-8; `what` names it in the error.
    fn string(&mut self, what: &str) -> std::result::Result<String, Bad> {
        let len = self.varint()?;
        let mut bytes = Vec::new();
        self.bytes(len, &mut bytes)?;
        String::from_utf8(bytes).map_err(|_| corrupt(&format!("{what} not UTF-8")))
    }

    fn varint(&mut self) -> std::result::Result<u64, Bad> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let mut byte = [0u8];
            self.reader.read_exact(&mut byte)?;
            let low = (byte[0] & 0x7f) as u64;
            if shift == 63 && low > 1 {
                break;
            }
            n |= low << shift;
            if byte[0] & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(corrupt("a number of more than 64 bits"))
    }

    /// Appends `len` bytes to `out`, growing it as the bytes come (a corrupt length must not make
    /// it ask for terabytes before the stream ends).
    fn bytes(&mut self, len: u64, out: &mut Vec<u8>) -> std::result::Result<(), Bad> {
        let mut left = len;
        while left > 0 {
            let step = left.min(1 << 16) as usize;
            try_reserve(out, step).map_err(|e| Bad::OutOfMemory(e.bytes))?;
            let start = out.len();
            out.resize(start + step, 0);
            self.reader.read_exact(&mut out[start..])?;
            left -= step as u64;
        }
        Ok(())
    }
}

fn counts_from_bytes(data: &[u8], name: &str) -> Result<CorpusCounts> {
    let bad = |why: String| Error::BadCountsFile {
        name: name.to_string(),
        why,
    };
    if data.len() < MAGIC.len() || &data[..MAGIC.len()] != MAGIC {
        return Err(bad("not a bytepair counts file".to_string()));
    }
    let Some(version) = data.get(8..12) else {
        return Err(bad("the file is truncated".to_string()));
    };
    let version = u32::from_le_bytes(version.try_into().expect("4 bytes"));
    if version > VERSION {
        return Err(bad(format!(
            "written by a newer bytepair (counts file version {version}; this one reads version \
             {VERSION}): upgrade bytepair to read it"
        )));
    }
    if version != VERSION {
        return Err(bad(format!("the file is corrupt (version {version})")));
    }
    read_frame(&data[12..]).map_err(|e| e.named(name))
}

fn read_frame(frame: &[u8]) -> std::result::Result<CorpusCounts, Bad> {
    let decoder = zstd::stream::read::Decoder::with_buffer(frame)?.single_frame();
    let mut fields = Fields {
        reader: io::BufReader::new(decoder),
    };
    let Header {
        documents,
        skipped,
        bytes,
        special_occurrences,
        tokens,
        pretokens: distinct,
    } = fields.header()?;
    let mut pretokens = PreTokenCounts::new().map_err(|_| Bad::OutOfMemory(8 << 16))?;
    // Every occurrence is at least a byte: more occurrences than bytes is no count of a text, and
    // would let merging overflow (see `CorpusCounts::update`).
    let mut occurrences = 0u64;
    let mut previous: Vec<u8> = Vec::new();
    for i in 0..distinct {
        let shared = fields.varint()?;
        if shared > previous.len() as u64 {
            return Err(corrupt("a pre-token shares more than the one before has"));
        }
        let mut piece = Vec::new();
        try_reserve(&mut piece, shared as usize).map_err(|e| Bad::OutOfMemory(e.bytes))?;
        piece.extend_from_slice(&previous[..shared as usize]);
        let rest = fields.varint()?;
        fields.bytes(rest, &mut piece)?;
        let count = fields.varint()?;
        if count == 0 || (i > 0 && piece <= previous) || piece.is_empty() {
            return Err(corrupt("pre-tokens out of order, empty or not counted"));
        }
        occurrences = occurrences
            .checked_add(count)
            .filter(|&n| n <= bytes)
            .ok_or_else(|| corrupt("more pre-tokens than bytes"))?;
        pretokens
            .add(&piece, count)
            .map_err(|e| Bad::OutOfMemory(e.bytes))?;
        previous = piece;
    }
    pretokens.add_totals(bytes, special_occurrences);
    let mut more = [0u8];
    if fields.reader.read(&mut more)? != 0 {
        return Err(corrupt("data after the counts"));
    }
    if !fields.reader.get_ref().get_ref().is_empty() {
        return Err(corrupt("data after the zstd frame"));
    }
    Ok(CorpusCounts::from_parts(
        pretokens, documents, skipped, tokens,
    ))
}

impl<'a> Fields<&'a [u8]> {
    /// A pre-token of the transfer form, borrowed from it, and its count.
    fn entry(&mut self) -> std::result::Result<(&'a [u8], u64), Bad> {
        let len = self.varint()?;
        let data: &'a [u8] = self.reader;
        if len > data.len() as u64 {
            return Err(Bad::Why("the data is truncated".to_string()));
        }
        let (piece, rest) = data.split_at(len as usize);
        self.reader = rest;
        Ok((piece, self.varint()?))
    }
}

/// The body of the transfer form `data` (after the magic and version, before the checksum), checked
/// against its checksum.
fn transfer_body<'d>(data: &'d [u8], name: &str) -> Result<&'d [u8]> {
    let bad = |why: String| Error::BadCountsFile {
        name: name.to_string(),
        why,
    };
    if data.len() < TRANSFER_MAGIC.len() || &data[..TRANSFER_MAGIC.len()] != TRANSFER_MAGIC {
        return Err(bad("not bytepair counts in their transfer form".to_string()));
    }
    if data.len() < 16 {
        return Err(bad("the data is truncated".to_string()));
    }
    let version = u32::from_le_bytes(data[8..12].try_into().expect("4 bytes"));
    if version != TRANSFER_VERSION {
        return Err(bad(format!(
            "counts in transfer form version {version}, which this bytepair (version \
             {TRANSFER_VERSION}) does not read: the processes that exchange counts must run the \
             same bytepair"
        )));
    }
    let (body, checksum) = data.split_at(data.len() - 4);
    if crc32fast::hash(body).to_le_bytes() != checksum {
        return Err(bad(
            "the data is truncated or corrupt (its checksum does not match)".to_string(),
        ));
    }
    Ok(&body[12..])
}

/// Counts with the totals of a transfer form and no pre-tokens, `messages` among its `skipped`.
fn with_messages(
    pretokens: PreTokenCounts,
    documents: u64,
    skipped: u64,
    tokens: Vec<String>,
    messages: Vec<String>,
) -> CorpusCounts {
    let others = skipped.saturating_sub(messages.len() as u64);
    let mut counts = CorpusCounts::from_parts(pretokens, documents, others, tokens);
    // Each message counts one of the records skipped.
    for m in messages {
        counts.add_skipped(m);
    }
    counts
}

/// A transfer form checked whole: its totals (counts with no pre-tokens), how many pre-tokens follow,
/// and where each block of [`BLOCK`] of them starts, as the bytes left from there to the end.
struct Transfer {
    totals: CorpusCounts,
    pretokens: u64,
    blocks: Vec<usize>,
}

/// The transfer form's `body` checked whole (see [`add_transfer`]).
fn read_transfer(body: &[u8]) -> std::result::Result<Transfer, Bad> {
    let mut fields = Fields { reader: body };
    let header = fields.header()?;
    let mut messages = Vec::new();
    for _ in 0..fields.varint()? {
        messages.push(fields.string("a message")?);
    }
    if messages.len() as u64 > header.skipped {
        return Err(corrupt("more messages than records skipped"));
    }
    let mut blocks: Vec<usize> = Vec::new();
    // Every occurrence is at least a byte (see `read_frame`).
    let mut occurrences = 0u64;
    for i in 0..header.pretokens {
        if i % BLOCK as u64 == 0 {
            try_reserve(&mut blocks, 1).map_err(|e| Bad::OutOfMemory(e.bytes))?;
            blocks.push(fields.reader.len());
        }
        let (piece, count) = fields.entry()?;
        if count == 0 || piece.is_empty() {
            return Err(corrupt("a pre-token empty or not counted"));
        }
        occurrences = occurrences
            .checked_add(count)
            .filter(|&n| n <= header.bytes)
            .ok_or_else(|| corrupt("more pre-tokens than bytes"))?;
    }
    if !fields.reader.is_empty() {
        return Err(corrupt("data after the counts"));
    }
    let mut totals = PreTokenCounts::new().map_err(|_| Bad::OutOfMemory(8 << 16))?;
    totals.add_totals(header.bytes, header.special_occurrences);
    Ok(Transfer {
        totals: with_messages(
            totals,
            header.documents,
            header.skipped,
            header.tokens,
            messages,
        ),
        pretokens: header.pretokens,
        blocks,
    })
}

/// Adds the pre-tokens of the transfer form's `body`, checked as `transfer`, to `pretokens`.
///
/// They come in the order of the map that wrote them, which is the order of their hashes, and so of
/// their places in the map they go to: added in that order, they would fill the part of a growing map
/// their hashes cover into one run that every later key probes to its end (the reason
/// `CountMap::add_all` scrambles too). So the blocks are added in a scrambled order.
fn add_transfer(
    body: &[u8],
    transfer: &Transfer,
    pretokens: &mut PreTokenCounts,
) -> std::result::Result<(), Bad> {
    let blocks = &transfer.blocks;
    let step = coprime_step(blocks.len());
    let mut block = 0;
    for _ in 0..blocks.len() {
        let mut entries = Fields {
            reader: &body[body.len() - blocks[block]..],
        };
        let first = (block * BLOCK) as u64;
        for _ in first..transfer.pretokens.min(first + BLOCK as u64) {
            let (piece, count) = entries.entry()?;
            pretokens
                .add(piece, count)
                .map_err(|e| Bad::OutOfMemory(e.bytes))?;
        }
        block += step;
        if block >= blocks.len() {
            block -= blocks.len();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::count::{count_texts, Errors, SourceOptions};
    use crate::special::SpecialTokens;

    /// The counts of `texts`, in which "!" is a bad record (skipped).
    fn counts(texts: &[&str], specials: &[&str]) -> CorpusCounts {
        let specials = SpecialTokens::new(specials).unwrap();
        let options = SourceOptions {
            specials: &specials,
            text_field: "text",
            errors: Errors::Skip,
            chunk_size: 16,
            threads: 2,
        };
        let text = |i: usize| match texts[i] {
            "!" => Err(Error::InvalidCounts("bad".to_string())),
            text => Ok(text),
        };
        let mut kept = Vec::new();
        let mut counts = count_texts(texts.len(), text, &options, &mut kept).unwrap();
        counts.add_kept(kept).unwrap();
        counts
    }

    const TEXTS: [&str; 5] = [
        "the cat sat on the mat<|eot|> then theatre themes",
        "  日本語 x\u{e9}t\u{e9} a ab abc abcd 0 00 000 \0\0\0",
        "\u{1f600}\u{1f600}\u{1f600}\u{1f600}\u{1f600}\u{1f600}\u{1f600}\u{1f600}\u{1f600}",
        "",
        "!",
    ];

    #[test]
    fn counts_read_back_as_they_were_and_same_counts_give_same_bytes() {
        let a = counts(&TEXTS, &["<|eot|>", "<pad>"]);
        assert_eq!((a.documents(), a.skipped()), (4, 1));
        let bytes = counts_to_bytes(&a).unwrap();
        assert_eq!(&bytes[..12], b"BPCOUNTS\x01\x00\x00\x00");
        let back = counts_from_bytes(&bytes, "a.bpc").unwrap();
        assert_eq!(back, a);
        assert_eq!(back.special_tokens().unwrap(), ["<|eot|>", "<pad>"]);
        // Counted in another order and on one thread: other hash order, same bytes.
        let mut reversed = TEXTS;
        reversed.reverse();
        let b = counts(&reversed, &["<|eot|>", "<pad>"]);
        assert_eq!(counts_to_bytes(&b).unwrap(), bytes);
        let empty = CorpusCounts::new().unwrap();
        let back = counts_from_bytes(&counts_to_bytes(&empty).unwrap(), "e").unwrap();
        assert_eq!(
            (back.pretokens().len(), back.special_tokens()),
            (0, Some([].as_slice()))
        );
    }

    #[test]
    fn foreign_newer_truncated_and_corrupt_files_are_errors() {
        let bytes = counts_to_bytes(&counts(&TEXTS, &["<|eot|>"])).unwrap();
        let error = |data: &[u8]| counts_from_bytes(data, "c.bpc").unwrap_err().to_string();
        assert_eq!(
            error(b"PK\x03\x04 a zip"),
            "c.bpc: not a bytepair counts file"
        );
        assert_eq!(error(b""), "c.bpc: not a bytepair counts file");
        let mut newer = bytes.clone();
        newer[8] = 2;
        assert!(
            error(&newer).starts_with("c.bpc: written by a newer bytepair (counts file version 2")
        );
        for cut in [10, 13, bytes.len() / 2, bytes.len() - 1] {
            let e = error(&bytes[..cut]);
            assert!(e.starts_with("c.bpc: the file is "), "cut at {cut}: {e}");
        }
        // A changed byte is an error, or leaves the counts as they were (the checksum covers the
        // content, not every bit of the frame's headers: 3 of 131 bytes here).
        let original = counts_from_bytes(&bytes, "c.bpc").unwrap();
        let mut errors = 0;
        for i in 12..bytes.len() {
            let mut corrupt = bytes.clone();
            corrupt[i] ^= 0x10;
            match counts_from_bytes(&corrupt, "c.bpc") {
                Ok(counts) => assert_eq!(counts, original, "byte {i}"),
                Err(e) => {
                    errors += 1;
                    let e = e.to_string();
                    assert!(e.starts_with("c.bpc: the file is "), "byte {i}: {e}")
                }
            }
        }
        assert!(errors * 10 >= (bytes.len() - 12) * 9, "{errors} errors");
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert_eq!(
            error(&trailing),
            "c.bpc: the file is corrupt (data after the zstd frame)"
        );
    }

    #[test]
    fn the_transfer_form_reads_back_as_it_was_messages_included() {
        let a = counts(&TEXTS, &["<|eot|>", "<pad>"]);
        let data = a.to_transfer().unwrap();
        let back = CorpusCounts::from_transfer(&data, "pickled").unwrap();
        assert_eq!(back, a);
        assert_eq!(back.skipped_errors(), a.skipped_errors());
        assert_eq!(back.special_tokens().unwrap(), ["<|eot|>", "<pad>"]);
        // Enough pre-tokens for many blocks, added in a scrambled order: the same counts.
        let words: Vec<String> = (0..20_000).map(|i| format!(" w{i} w{}", i % 977)).collect();
        let texts: Vec<&str> = words.iter().map(String::as_str).collect();
        let many = counts(&texts, &["<|eot|>", "<pad>"]);
        assert!(many.pretokens().len() > 20_000);
        let back = CorpusCounts::from_transfer(&many.to_transfer().unwrap(), "p").unwrap();
        assert_eq!(back, many);
        // Added to other counts: as `update` adds them.
        let mut sum = many.clone();
        sum.update_from_transfer(&data, "p").unwrap();
        let mut expected = many.clone();
        expected.update(&a).unwrap();
        assert_eq!(sum, expected);
        assert_eq!(sum.skipped_errors(), expected.skipped_errors());
        let other = counts(&["x"], &["<|eot|>"]).to_transfer().unwrap();
        let e = sum.update_from_transfer(&other, "p").unwrap_err();
        assert!(e
            .to_string()
            .starts_with("cannot merge counts made with different special tokens"));
        assert_eq!(sum, expected);
        let empty = CorpusCounts::new().unwrap();
        let back = CorpusCounts::from_transfer(&empty.to_transfer().unwrap(), "e").unwrap();
        assert_eq!(back.pretokens().len(), 0);
    }

    #[test]
    fn foreign_other_version_truncated_and_corrupt_transfers_are_errors() {
        let a = counts(&TEXTS, &["<|eot|>"]);
        let data = a.to_transfer().unwrap();
        let error = |data: &[u8]| {
            CorpusCounts::from_transfer(data, "pickled")
                .unwrap_err()
                .to_string()
        };
        let file = counts_to_bytes(&a).unwrap();
        assert_eq!(
            error(&file),
            "pickled: not bytepair counts in their transfer form"
        );
        let mut other = data.clone();
        other[8] = 2;
        assert!(error(&other).starts_with("pickled: counts in transfer form version 2"));
        for cut in [10, 13, data.len() / 2, data.len() - 1] {
            let e = error(&data[..cut]);
            assert!(
                e.starts_with("pickled: the data is truncated"),
                "cut at {cut}: {e}"
            );
        }
        // The checksum covers every byte after the version.
        for i in 12..data.len() {
            let mut corrupt = data.clone();
            corrupt[i] ^= 0x10;
            let e = error(&corrupt);
            assert!(
                e.starts_with("pickled: the data is truncated or corrupt"),
                "byte {i}: {e}"
            );
        }
    }
}
