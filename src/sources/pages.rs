//! The page headers of a Parquet column chunk, read before arrow-rs decodes it, to refuse the pages it
//! cannot decode safely.
//!
//! arrow-rs 60.1's decoders of `DELTA_LENGTH_BYTE_ARRAY` and `DELTA_BYTE_ARRAY` pages allocate as many
//! values as the page's own delta header claims, unchecked: a damaged one claiming 10^14 values aborts
//! the process (found by the fuzz target `parquet`). So a column chunk whose pages use either encoding
//! is refused as damaged data before decoding. pyarrow, Spark (v1 pages) and DuckDB write strings as
//! `PLAIN` or dictionary pages by default; the delta encodings are written only when asked for.
//!
//! The headers are Thrift (compact protocol) structs; only the fields needed are read, the others
//! skipped, every length checked against the bytes there are, nesting bounded.

use std::io::{self, Read};

/// Encodings of a data page that are refused (parquet.thrift's `Encoding`).
const DELTA_LENGTH_BYTE_ARRAY: i64 = 6;
const DELTA_BYTE_ARRAY: i64 = 7;

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

/// How deep structs may nest in a page header (parquet.thrift's go three deep).
const MAX_DEPTH: usize = 16;

/// What a page header says, of what is checked.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct PageHeader {
    /// The bytes of the page after its header.
    pub(crate) compressed_size: i64,
    /// The encoding of a data page's values (v1 or v2), None for other pages.
    pub(crate) encoding: Option<i64>,
}

impl PageHeader {
    /// Whether arrow-rs's decoder of this page's values is one that a damaged page can abort.
    pub(crate) fn refused(&self) -> Option<&'static str> {
        match self.encoding {
            Some(DELTA_LENGTH_BYTE_ARRAY) => Some("DELTA_LENGTH_BYTE_ARRAY"),
            Some(DELTA_BYTE_ARRAY) => Some("DELTA_BYTE_ARRAY"),
            _ => None,
        }
    }
}

/// Reads a page header from `reader`: the header and its length in bytes. Fails on bytes that are not
/// a header (`InvalidData`), and on what `reader` fails with.
pub(crate) fn read_page_header(reader: &mut impl Read) -> io::Result<(PageHeader, u64)> {
    let mut input = Input { reader, read: 0 };
    let mut header = PageHeader::default();
    let mut field = 0i16;
    loop {
        let (kind, id) = input.field_header(&mut field)?;
        if kind == STOP {
            break;
        }
        match (id, kind) {
            (3, I32) => header.compressed_size = input.integer()?,
            // data_page_header (encoding is its field 2) and data_page_header_v2 (its field 4).
            (5, STRUCT) => header.encoding = input.struct_field(2)?,
            (8, STRUCT) => header.encoding = input.struct_field(4)?,
            _ => input.skip(kind, 0)?,
        }
    }
    if header.compressed_size < 0 {
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

    /// A zigzag-encoded integer (i16, i32 or i64).
    fn integer(&mut self) -> io::Result<i64> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// The type and id of the next field of a struct whose last field was `last`.
    fn field_header(&mut self, last: &mut i16) -> io::Result<(u8, i16)> {
        let b = self.byte()?;
        let kind = b & 0x0f;
        if kind == STOP {
            return Ok((STOP, 0));
        }
        let delta = i16::from(b >> 4);
        let id = match delta {
            0 => i16::try_from(self.integer()?).map_err(|_| invalid("a field id past i16"))?,
            d => last
                .checked_add(d)
                .ok_or_else(|| invalid("a field id past i16"))?,
        };
        *last = id;
        Ok((kind, id))
    }

    /// The i32 field `wanted` of a struct, the rest skipped.
    fn struct_field(&mut self, wanted: i16) -> io::Result<Option<i64>> {
        let mut found = None;
        let mut field = 0i16;
        loop {
            let (kind, id) = self.field_header(&mut field)?;
            match (kind, id) {
                (STOP, _) => return Ok(found),
                (I32, id) if id == wanted => found = Some(self.integer()?),
                _ => self.skip(kind, 1)?,
            }
        }
    }

    /// Skips a value of type `kind`, nested `depth` deep.
    fn skip(&mut self, kind: u8, depth: usize) -> io::Result<()> {
        if depth > MAX_DEPTH {
            return Err(invalid("structs nested too deep"));
        }
        match kind {
            BOOLEAN_TRUE | BOOLEAN_FALSE => Ok(()),
            BYTE => self.byte().map(drop),
            I16 | I32 | I64 => self.varint().map(drop),
            DOUBLE => (0..8).try_for_each(|_| self.byte().map(drop)),
            BINARY => {
                let len = self.varint()?;
                let skipped = io::copy(&mut (&mut *self.reader).take(len), &mut io::sink())?;
                self.read += skipped;
                match skipped == len {
                    true => Ok(()),
                    false => Err(io::ErrorKind::UnexpectedEof.into()),
                }
            }
            LIST | SET => {
                let b = self.byte()?;
                let size = match b >> 4 {
                    15 => self.varint()?,
                    n => u64::from(n),
                };
                let element = b & 0x0f;
                (0..size).try_for_each(|_| self.skip_element(element, depth))
            }
            MAP => {
                let size = self.varint()?;
                if size == 0 {
                    return Ok(());
                }
                let kinds = self.byte()?;
                (0..size).try_for_each(|_| {
                    self.skip_element(kinds >> 4, depth)?;
                    self.skip_element(kinds & 0x0f, depth)
                })
            }
            STRUCT => {
                let mut field = 0i16;
                loop {
                    let (kind, _) = self.field_header(&mut field)?;
                    if kind == STOP {
                        return Ok(());
                    }
                    self.skip(kind, depth + 1)?;
                }
            }
            _ => Err(invalid("an unknown Thrift type")),
        }
    }

    /// Skips an element of a list or map, whose booleans take a byte each.
    fn skip_element(&mut self, kind: u8, depth: usize) -> io::Result<()> {
        match kind {
            BOOLEAN_TRUE | BOOLEAN_FALSE => self.byte().map(drop),
            kind => self.skip(kind, depth + 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A data page header (v1) of `size` bytes whose values are in `encoding`, as Thrift writes it.
    fn header(encoding: u8, size: u8) -> Vec<u8> {
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
            0x15,
            zigzag(encoding), // encoding
            0x00,             // end of data_page_header
            0x00,             // end of the page header
        ]
    }

    #[test]
    fn data_pages_say_their_size_and_encoding_and_delta_ones_are_refused() {
        let bytes = [header(7, 50), b"the page".to_vec()].concat();
        let (page, len) = read_page_header(&mut bytes.as_slice()).unwrap();
        assert_eq!(
            (page.compressed_size, page.encoding, len),
            (50, Some(7), 13)
        );
        assert_eq!(page.refused(), Some("DELTA_BYTE_ARRAY"));
        let (page, _) = read_page_header(&mut header(6, 50).as_slice()).unwrap();
        assert_eq!(page.refused(), Some("DELTA_LENGTH_BYTE_ARRAY"));
        for plain_or_dictionary in [0, 2, 8] {
            let (page, _) =
                read_page_header(&mut header(plain_or_dictionary, 50).as_slice()).unwrap();
            assert_eq!(page.refused(), None);
        }
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
        let deep = [vec![0x1c; 40], vec![0x00; 40]].concat();
        let e = read_page_header(&mut deep.as_slice()).unwrap_err();
        assert_eq!(e.to_string(), "structs nested too deep");
        let negative = [0x15, 0x01, 0x00]; // compressed_page_size -1
        let mut bytes = vec![0x15, 0x00, 0x15, 0x02];
        bytes.extend(negative);
        assert!(read_page_header(&mut bytes.as_slice()).is_err());
    }
}
