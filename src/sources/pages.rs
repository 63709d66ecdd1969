//! The page headers of a Parquet column chunk, read before arrow-rs decodes it: to refuse the pages it
//! cannot decode safely, and to learn the memory its pages will take.
//!
//! arrow-rs 60.1's decoders of `DELTA_LENGTH_BYTE_ARRAY` and `DELTA_BYTE_ARRAY` pages allocate as many
//! values as the page's own delta header claims, unchecked: a damaged one claiming 10^14 values aborts
//! the process (found by the fuzz target `parquet`). So a column chunk whose data pages use either
//! encoding is refused as damaged data before decoding. pyarrow, Spark (v1 pages) and DuckDB write
//! strings as `PLAIN` or dictionary pages by default; the delta encodings are written only when asked
//! for.
//!
//! The headers are Thrift (compact protocol) structs. They are read exactly as arrow-rs 60.1 reads them
//! (`PageHeader::read_thrift_without_stats`), since a check that reads a damaged header differently
//! from the decoder checks another page than the one decoded: a field the reader knows is read by its
//! id whatever type it declares (a page's encoding declared as an `i16` is still its encoding, found by
//! the fuzz target), integers are truncated to 32 bits, the others are skipped by their declared type
//! (a boolean in a list taking no byte, as in arrow-rs), nesting is bounded (64 deep, as in
//! arrow-rs), and the next page starts where arrow-rs's does. Where this reader fails and arrow-rs
//! might not, the row group is refused: what matters is that no header it accepts means something else
//! to arrow-rs.

use std::io::{self, Read};

/// Encodings of a data page that are refused (parquet.thrift's `Encoding`).
const DELTA_LENGTH_BYTE_ARRAY: i32 = 6;
const DELTA_BYTE_ARRAY: i32 = 7;

/// parquet.thrift's `PageType` of a dictionary page.
const DICTIONARY_PAGE: i32 = 2;

/// Thrift compact protocol types.
const STOP: u8 = 0;
const BOOLEAN_TRUE: u8 = 1;
const BOOLEAN_FALSE: u8 = 2;
const BYTE: u8 = 3;
const I16: u8 = 4;
const I32: u8 = 5;
const I64: u8 = 6;
const DOUBLE: u8 = 7;
const BINARY: u8 = 8;
const LIST: u8 = 9;
const SET: u8 = 10;
const MAP: u8 = 11;
const STRUCT: u8 = 12;
const UUID: u8 = 13;

/// How deep a skipped value may nest (arrow-rs's `DEFAULT_SKIP_DEPTH`).
const MAX_DEPTH: usize = 64;

/// What a page header says, of what is checked.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct PageHeader {
    /// parquet.thrift's `PageType`.
    pub(crate) page_type: i32,
    /// The bytes of the page after its header, as stored.
    pub(crate) compressed_size: i32,
    /// The bytes of the page decompressed.
    pub(crate) uncompressed_size: i32,
    /// The encodings of the values its data page headers give (v1's and v2's; a damaged page can have
    /// both).
    pub(crate) encodings: [Option<i32>; 2],
    /// The values its dictionary page header claims.
    pub(crate) dictionary_values: Option<i32>,
    /// Whether its (last) v2 data page header says the page is stored uncompressed, which arrow-rs
    /// then decodes as stored whatever its type and codec.
    pub(crate) stored_uncompressed: bool,
}

impl PageHeader {
    /// Why arrow-rs cannot decode this page safely, if it cannot: its values are in an encoding whose
    /// decoder a damaged page can abort, or it is a dictionary page claiming more values than its
    /// bytes can hold (arrow-rs reserves room for all of them first: 2^31 values are 8 GB). Each value
    /// of a dictionary page takes at least 4 bytes, its length. `compressed`: whether the column
    /// chunk's codec compresses (otherwise arrow-rs decodes the page as stored, whatever size the
    /// header claims for it decompressed; as it does when a v2 header says the page is not compressed).
    pub(crate) fn refused(&self, compressed: bool) -> Option<String> {
        let delta = self.encodings.iter().flatten().find_map(|&e| match e {
            DELTA_LENGTH_BYTE_ARRAY => Some("DELTA_LENGTH_BYTE_ARRAY"),
            DELTA_BYTE_ARRAY => Some("DELTA_BYTE_ARRAY"),
            _ => None,
        });
        if let Some(encoding) = delta {
            return Some(format!(
                "a page of {encoding} values, an encoding this reader refuses (a damaged page of it \
                 can abort the decoder, arrow-rs 60)"
            ));
        }
        let values = self.dictionary_values.unwrap_or(0).max(0) as u64;
        let bytes = self.decoded_size(compressed);
        (values > bytes / 4)
            .then(|| format!("a dictionary page claiming {values} values in {bytes} bytes"))
    }

    /// Whether it is a dictionary page.
    pub(crate) fn is_dictionary(&self) -> bool {
        self.page_type == DICTIONARY_PAGE
    }

    /// The bytes arrow-rs decodes the page's values from: the page decompressed (of the size the header
    /// claims, which it allocates first), or as stored (no codec, or a v2 header saying so).
    fn decoded_size(&self, compressed: bool) -> u64 {
        match compressed && !self.stored_uncompressed {
            true => self.uncompressed_size.max(0) as u64,
            false => self.compressed_size.max(0) as u64,
        }
    }

    /// The most memory arrow-rs takes for the page while decoding it: the page as stored, decompressed
    /// (see [`Self::refused`] for `compressed`), and for a dictionary page the dictionary decoded,
    /// about its size again (its strings, and an offset for each of at least 4 bytes).
    pub(crate) fn memory(&self, compressed: bool) -> u64 {
        let stored = self.compressed_size.max(0) as u64;
        let decoded = match compressed {
            true => self.decoded_size(compressed),
            false => 0,
        };
        match self.is_dictionary() {
            true => stored + decoded + 2 * self.decoded_size(compressed),
            false => stored + decoded,
        }
    }
}

/// How arrow-rs reads a field of a header's struct, by the field's id.
#[derive(Clone, Copy)]
enum Field {
    /// An `i32` (or an enum), read as a zigzag varint whatever type the field declares.
    Int,
    /// A `bool`, which must be declared a boolean and takes no byte.
    Bool,
    /// A field it does not read, skipped by the type it declares.
    Skip,
}

/// Reads a page header from `reader`: the header and its length in bytes. Fails on bytes that are not
/// a header (`InvalidData`), and on what `reader` fails with.
pub(crate) fn read_page_header(reader: &mut impl Read) -> io::Result<(PageHeader, u64)> {
    let mut input = Input { reader, read: 0 };
    let mut header = PageHeader::default();
    input.read_struct(|input, id, kind| {
        match id {
            1 => header.page_type = input.int()?,
            2 => header.uncompressed_size = input.int()?,
            3 => header.compressed_size = input.int()?,
            4 => _ = input.int()?,
            // data_page_header: num_values, encoding, and the two levels' encodings.
            5 => {
                (header.encodings[0], _) = input.header(2, |id| match id {
                    1..=4 => Field::Int,
                    _ => Field::Skip,
                })?
            }
            // index_page_header, which has no fields.
            6 => _ = input.header(0, |_| Field::Skip)?,
            // dictionary_page_header: num_values, encoding, is_sorted.
            7 => {
                (header.dictionary_values, _) = input.header(1, |id| match id {
                    1 | 2 => Field::Int,
                    3 => Field::Bool,
                    _ => Field::Skip,
                })?;
            }
            // data_page_header_v2: num_values, num_nulls, num_rows, encoding, the two levels'
            // lengths, is_compressed.
            8 => {
                let is_compressed;
                (header.encodings[1], is_compressed) = input.header(4, |id| match id {
                    1..=6 => Field::Int,
                    7 => Field::Bool,
                    _ => Field::Skip,
                })?;
                header.stored_uncompressed = is_compressed == Some(false);
            }
            _ => input.skip(kind, MAX_DEPTH)?,
        }
        Ok(())
    })?;
    if header.compressed_size < 0 || header.uncompressed_size < 0 {
        return Err(invalid("a page of negative size"));
    }
    Ok((header, input.read))
}

fn invalid(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why.to_string())
}

/// The bytes of a header, counted.
struct Input<'r, R> {
    reader: &'r mut R,
    read: u64,
}

impl<R: Read> Input<'_, R> {
    fn byte(&mut self) -> io::Result<u8> {
        let mut b = [0u8];
        self.reader.read_exact(&mut b)?;
        self.read += 1;
        Ok(b[0])
    }

    fn varint(&mut self) -> io::Result<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(invalid("a varint of more than 10 bytes"))
    }

    /// A zigzag-encoded integer.
    fn zigzag(&mut self) -> io::Result<i64> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// An `i32` as arrow-rs reads it: a zigzag integer, truncated.
    fn int(&mut self) -> io::Result<i32> {
        Ok(self.zigzag()? as i32)
    }

    /// A count of a list's or map's elements, which arrow-rs refuses past `i32::MAX`.
    fn count(&mut self) -> io::Result<u64> {
        let n = self.varint()?;
        match i32::try_from(n) {
            Ok(_) => Ok(n),
            Err(_) => Err(invalid("a count past i32")),
        }
    }

    /// Reads the fields of a struct, each by `field(self, id, declared type)`, to its end.
    fn read_struct(
        &mut self,
        mut field: impl FnMut(&mut Self, i16, u8) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut last = 0i16;
        loop {
            let b = self.byte()?;
            let kind = b & 0x0f;
            if kind == STOP {
                return Ok(());
            }
            let id = match b >> 4 {
                // A full id: arrow-rs truncates it to an i16.
                0 => self.zigzag()? as i16,
                delta => last
                    .checked_add(i16::from(delta))
                    .ok_or_else(|| invalid("a field id past i16"))?,
            };
            field(self, id, kind)?;
            last = id;
        }
    }

    /// Reads a struct whose fields are read as `fields` says: the value of its field `wanted` (an
    /// `i32`) and of its boolean field, if it has them (the last of each, as in arrow-rs).
    fn header(
        &mut self,
        wanted: i16,
        fields: impl Fn(i16) -> Field,
    ) -> io::Result<(Option<i32>, Option<bool>)> {
        let (mut found, mut flag) = (None, None);
        self.read_struct(|input, id, kind| match fields(id) {
            Field::Int => {
                let value = input.int()?;
                if id == wanted {
                    found = Some(value);
                }
                Ok(())
            }
            Field::Bool => match kind {
                BOOLEAN_TRUE | BOOLEAN_FALSE => {
                    flag = Some(kind == BOOLEAN_TRUE);
                    Ok(())
                }
                _ => Err(invalid("a boolean field of another type")),
            },
            Field::Skip => input.skip(kind, MAX_DEPTH),
        })?;
        Ok((found, flag))
    }

    /// Skips a value of type `kind`, as arrow-rs's `skip_till_depth` does, `depth` levels left.
    fn skip(&mut self, kind: u8, depth: usize) -> io::Result<()> {
        if depth == 0 {
            return Err(invalid("structs nested too deep"));
        }
        match kind {
            BOOLEAN_TRUE | BOOLEAN_FALSE => Ok(()),
            BYTE => self.byte().map(drop),
            I16 | I32 | I64 => self.varint().map(drop),
            DOUBLE => self.skip_bytes(8),
            BINARY => {
                let len = self.varint()?;
                self.skip_bytes(len)
            }
            UUID => self.skip_bytes(16),
            LIST | SET => {
                let b = self.byte()?;
                if b == 0 {
                    return Ok(());
                }
                let element = element_type(b & 0x0f)?;
                let size = match b >> 4 {
                    15 => self.count()?,
                    n => u64::from(n),
                };
                self.skip_elements(element, size, depth)
            }
            MAP => {
                let size = self.count()?;
                if size == 0 {
                    return Ok(());
                }
                let kinds = self.byte()?;
                let (key, value) = (element_type(kinds >> 4)?, element_type(kinds & 0x0f)?);
                if (key, value) == (BOOLEAN_TRUE, BOOLEAN_TRUE) {
                    return Ok(());
                }
                (0..size).try_for_each(|_| {
                    self.skip(key, depth - 1)?;
                    self.skip(value, depth - 1)
                })
            }
            STRUCT => self.read_struct(|input, _, kind| input.skip(kind, depth - 1)),
            _ => Err(invalid("an unknown Thrift type")),
        }
    }

    /// Skips `size` elements of type `kind`; booleans take no byte in arrow-rs's skipping.
    fn skip_elements(&mut self, kind: u8, size: u64, depth: usize) -> io::Result<()> {
        match kind {
            BOOLEAN_TRUE => Ok(()),
            kind => (0..size).try_for_each(|_| self.skip(kind, depth - 1)),
        }
    }

    /// Skips `n` bytes, failing if there are fewer.
    fn skip_bytes(&mut self, n: u64) -> io::Result<()> {
        let skipped = io::copy(&mut (&mut *self.reader).take(n), &mut io::sink())?;
        self.read += skipped;
        match skipped == n {
            true => Ok(()),
            false => Err(io::ErrorKind::UnexpectedEof.into()),
        }
    }
}

/// The type of a list's or map's elements, as arrow-rs reads it: a boolean is 1 or 2.
fn element_type(nibble: u8) -> io::Result<u8> {
    match nibble {
        1 | 2 => Ok(BOOLEAN_TRUE),
        3..=13 => Ok(nibble),
        _ => Err(invalid("an unknown Thrift element type")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A data page header (v1) of `size` bytes whose values are in `encoding`, as Thrift writes it,
    /// the encoding's field declared of type `encoding_type`.
    fn header_typed(encoding: u8, size: u8, encoding_type: u8) -> Vec<u8> {
        let zigzag = |v: u8| 2 * v;
        vec![
            0x15,
            0x00, // type: DATA_PAGE
            0x15,
            zigzag(size), // uncompressed_page_size
            0x15,
            zigzag(size), // compressed_page_size
            0x2c,         // data_page_header: a struct
            0x15,
            zigzag(10), // num_values
            0x10 | encoding_type,
            zigzag(encoding), // encoding
            0x00,             // end of data_page_header
            0x00,             // end of the page header
        ]
    }

    fn header(encoding: u8, size: u8) -> Vec<u8> {
        header_typed(encoding, size, I32)
    }

    /// The encoding a page is refused for, if it is.
    fn refused(page: &PageHeader) -> Option<&'static str> {
        let why = page.refused(true)?;
        ["DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY"]
            .into_iter()
            .find(|encoding| why.starts_with(&format!("a page of {encoding} values")))
    }

    #[test]
    fn data_pages_say_their_size_and_encoding_and_delta_ones_are_refused() {
        let bytes = [header(7, 50), b"the page".to_vec()].concat();
        let (page, len) = read_page_header(&mut bytes.as_slice()).unwrap();
        assert_eq!(
            (page.compressed_size, page.encodings, len),
            (50, [Some(7), None], 13)
        );
        assert_eq!(refused(&page), Some("DELTA_BYTE_ARRAY"));
        assert_eq!((page.memory(true), page.memory(false)), (100, 50));
        let (page, _) = read_page_header(&mut header(6, 50).as_slice()).unwrap();
        assert_eq!(refused(&page), Some("DELTA_LENGTH_BYTE_ARRAY"));
        for plain_or_dictionary in [0, 2, 8] {
            let (page, _) =
                read_page_header(&mut header(plain_or_dictionary, 50).as_slice()).unwrap();
            assert_eq!(refused(&page), None);
        }
    }

    #[test]
    fn fields_are_read_by_id_whatever_type_they_declare_as_arrow_rs_reads_them() {
        // The fuzz finding: a DELTA_BYTE_ARRAY encoding declared an i16 (or a byte, or a boolean),
        // which arrow-rs still reads as the page's encoding.
        for declared in [I16, I64, BYTE, BOOLEAN_TRUE, BINARY] {
            let (page, _) =
                read_page_header(&mut header_typed(7, 50, declared).as_slice()).unwrap();
            assert_eq!(
                refused(&page),
                Some("DELTA_BYTE_ARRAY"),
                "declared {declared}"
            );
        }
        // An encoding of 2^32 + 7 is 7 to arrow-rs, which truncates integers to 32 bits.
        let mut bytes = header(0, 50);
        let at = bytes.len() - 3;
        bytes.splice(at..at + 1, [0x8e, 0x80, 0x80, 0x80, 0x20]);
        let (page, _) = read_page_header(&mut bytes.as_slice()).unwrap();
        assert_eq!(refused(&page), Some("DELTA_BYTE_ARRAY"));
        // A v2 data page's encoding (its field 4) is checked too.
        let v2 = [
            0x15, 0x06, // type: DATA_PAGE_V2
            0x15, 0x64, 0x15, 0x64, // sizes: 50
            0x5c, // field 8, data_page_header_v2: a struct
            0x15, 0x14, 0x15, 0x00, 0x15, 0x14, // num_values, num_nulls, num_rows
            0x15, 0x0c, // encoding: DELTA_LENGTH_BYTE_ARRAY
            0x00, 0x00,
        ];
        let (page, len) = read_page_header(&mut v2.as_slice()).unwrap();
        assert_eq!((page.encodings, len), ([None, Some(6)], 17));
    }

    #[test]
    fn skipped_fields_take_the_bytes_arrow_rs_skips() {
        // An unknown field 9 holding a list of three booleans, which arrow-rs skips without reading
        // a byte for each, then the compressed size: were a byte skipped per boolean, it would be
        // read from elsewhere.
        let bytes = [
            0x15, 0x00, // type
            0x15, 0x64, // uncompressed_page_size: 50
            0x09, 0x12, // field 9 (a full id), a list
            0x31, // three booleans
            0x0c, 0x06, // field 3 (a full id), declared a struct: read as an i32 all the same
            0x64, // 50
            0x00,
        ];
        let (page, len) = read_page_header(&mut bytes.as_slice()).unwrap();
        assert_eq!((page.compressed_size, len), (50, 11));
    }

    #[test]
    fn dictionary_pages_count_their_dictionary_and_cannot_claim_more_values_than_fit() {
        // A dictionary page of 10 bytes, 50 decompressed, claiming `values` values.
        let dictionary = |values: u8| {
            let header = [0x15, 0x04, 0x15, 0x64, 0x15, 0x14, 0x4c, 0x15, 2 * values];
            [&header[..], &[0x15, 0x00, 0x00, 0x00]].concat()
        };
        let (page, _) = read_page_header(&mut dictionary(12).as_slice()).unwrap();
        assert_eq!(page.dictionary_values, Some(12));
        assert_eq!(page.memory(true), 10 + 50 + 2 * 50);
        assert_eq!(page.memory(false), 10 + 2 * 10);
        assert_eq!(page.refused(true), None);
        // As stored (no codec), 10 bytes hold 2 values at most, whatever the header claims
        // decompressed; 50 bytes hold 12.
        assert_eq!(
            page.refused(false).unwrap(),
            "a dictionary page claiming 12 values in 10 bytes"
        );
        let (page, _) = read_page_header(&mut dictionary(13).as_slice()).unwrap();
        assert_eq!(
            page.refused(true).unwrap(),
            "a dictionary page claiming 13 values in 50 bytes"
        );
        // A v2 header saying the page is not compressed (found by a review): arrow-rs then decodes
        // even a dictionary page as stored, in a compressed chunk too, so its 4 bytes are what must
        // hold the values, not the 2 * 10^9 claimed decompressed.
        let stored = [
            0x15, 0x04, // DICTIONARY_PAGE
            0x15, 0x80, 0xd0, 0xac, 0xf3, 0x0e, // uncompressed_page_size: 2 * 10^9
            0x15, 0x08, // compressed_page_size: 4
            0x4c, 0x15, 0x80, 0x94, 0xeb, 0xdc, 0x03, 0x15, 0x00, 0x00, // 5 * 10^8 values
            0x1c, 0x15, 0x00, 0x15, 0x00, 0x15, 0x00, 0x15, 0x00, 0x15, 0x00, 0x15, 0x00, 0x12,
            0x00, // data_page_header_v2, is_compressed false
            0x00,
        ];
        let (page, len) = read_page_header(&mut stored.as_slice()).unwrap();
        assert_eq!(
            (page.dictionary_values, page.stored_uncompressed, len),
            (Some(500_000_000), true, 36)
        );
        assert_eq!(
            page.refused(true).unwrap(),
            "a dictionary page claiming 500000000 values in 4 bytes"
        );
        assert_eq!(page.memory(true), 4 + 4 + 2 * 4);
        // is_compressed true, or a later v2 header without it, leaves the page decompressed.
        let mut compressed = stored;
        compressed[33] = 0x11;
        let (page, _) = read_page_header(&mut compressed.as_slice()).unwrap();
        assert!(!page.stored_uncompressed);
        assert_eq!(page.refused(true), None);
    }

    #[test]
    fn damaged_headers_are_errors() {
        let whole = header(0, 50);
        for end in 0..whole.len() {
            assert!(
                read_page_header(&mut &whole[..end]).is_err(),
                "cut at {end}"
            );
        }
        // Field 9 (unknown, skipped), a struct of structs 70 deep.
        let deep = [vec![0x0c, 0x12], vec![0x1c; 70], vec![0x00; 71]].concat();
        let e = read_page_header(&mut deep.as_slice()).unwrap_err();
        assert_eq!(e.to_string(), "structs nested too deep");
        let negative = [0x15, 0x01, 0x00]; // compressed_page_size -1
        let mut bytes = vec![0x15, 0x00, 0x15, 0x02];
        bytes.extend(negative);
        assert!(read_page_header(&mut bytes.as_slice()).is_err());
        // A boolean field (is_sorted) declared another type is an error to arrow-rs too.
        let sorted = [0x7c, 0x35, 0x02, 0x00, 0x00]; // dictionary_page_header, is_sorted an i32
        assert!(read_page_header(&mut sorted.as_slice()).is_err());
    }
}
