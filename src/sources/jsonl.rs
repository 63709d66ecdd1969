//! JSON lines: one JSON object a line, each a document, its text in the field `text_field`.
//!
//! Each line is checked whole: it must be UTF-8 and one JSON object (RFC 8259: no `NaN`, no trailing
//! text, no lone surrogate in an escape), with the field, whose value is a string. Its text is the
//! string unescaped exactly, `\uXXXX` surrogate pairs included. Blank lines (spaces, tabs, `\r`) are
//! skipped, as is a byte order mark at the start of the file; a field given twice takes the last value,
//! as Python's `json` does. The other fields are checked and skipped without being built: the text is
//! borrowed from the line when it has no escapes, and copied once into a reused buffer when it has.
//!
//! A line is read in one pass by [`super::json_text`] when it is as datasets write them (the text
//! unescaped as it is scanned), and by serde_json otherwise.
//!
//! Lines are read into one buffer that grows (fallibly) to the longest line; a bad line is reported
//! with its number and what is wrong, for the caller to fail or skip.

use std::cell::Cell;
use std::fmt;
use std::io::{self, ErrorKind, Read};

use serde::de::{
    DeserializeSeed, Deserializer, Error as _, IgnoredAny, MapAccess, SeqAccess, Visitor,
};

use super::json_text::{text_field, Text};

/// The read buffer's first size; it doubles for a longer line.
const BUFFER: usize = 1 << 20;

/// The next item of a JSON lines file.
pub(crate) enum Record<'a> {
    /// The text of a good record.
    Text(&'a str),
    /// A bad record, and what is wrong with it.
    Bad(String),
    /// The end of the file.
    End,
}

/// The records of the JSON lines read from `R`.
pub(crate) struct JsonLines<R> {
    reader: R,
    field: String,
    /// Bytes read: `buf[start..end]` are not yet taken; `buf` is all initialized.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    /// The number of the last line taken, from 1.
    line: u64,
    /// The text of a string with escapes, unescaped.
    scratch: String,
    /// Set when `scratch` could not grow: the parse error that follows is out of memory.
    out_of_memory: Cell<bool>,
    /// The bytes a buffer asked for when it could not grow.
    wanted: usize,
}

impl<R: Read> JsonLines<R> {
    /// Reads the records of `reader`, their text from the field `field`.
    pub(crate) fn new(reader: R, field: &str) -> JsonLines<R> {
        JsonLines {
            reader,
            field: field.to_string(),
            buf: Vec::new(),
            start: 0,
            end: 0,
            eof: false,
            line: 0,
            scratch: String::new(),
            out_of_memory: Cell::new(false),
            wanted: 0,
        }
    }

    /// The bytes a buffer asked for when reading failed with `OutOfMemory`.
    pub(crate) fn wanted(&self) -> usize {
        self.wanted
    }

    /// The number of the line of the last record returned, from 1.
    pub(crate) fn line(&self) -> u64 {
        self.line
    }

    /// The next record. Fails when reading fails (an `OutOfMemory` error when a line cannot be held).
    pub(crate) fn next_record(&mut self) -> io::Result<Record<'_>> {
        let (start, end) = loop {
            let Some((start, end)) = self.next_line()? else {
                return Ok(Record::End);
            };
            let mut line = &self.buf[start..end];
            if self.line == 1 {
                line = line.strip_prefix("\u{feff}".as_bytes()).unwrap_or(line);
            }
            if !line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r')) {
                break (end - line.len(), end);
            }
        };
        let line = match simdutf8::compat::from_utf8(&self.buf[start..end]) {
            Ok(line) => line,
            Err(e) => {
                let why = format!(
                    "invalid UTF-8 at byte {} of the line; the input must be UTF-8 text",
                    e.valid_up_to()
                );
                return Ok(Record::Bad(why));
            }
        };
        // Nearly every line of a dataset is read by the one-pass reader, the rest by serde_json.
        let text = match text_field(line, &self.field, &mut self.scratch) {
            Some(text) => Ok(Some(text)),
            None => parse_line(line, &self.field, &mut self.scratch, &self.out_of_memory),
        };
        match text {
            Ok(Some(Text::Borrowed(text))) => Ok(Record::Text(text)),
            Ok(Some(Text::Scratch)) => Ok(Record::Text(&self.scratch)),
            Ok(None) => Ok(Record::Bad(format!("no field {:?}", self.field))),
            Err(_) if self.out_of_memory.get() => {
                self.wanted = self.buf.len();
                Err(ErrorKind::OutOfMemory.into())
            }
            Err(e) => Ok(Record::Bad(describe(&e))),
        }
    }

    /// The bounds in `buf` of the next line, without its `\n`; None at the end of the input.
    fn next_line(&mut self) -> io::Result<Option<(usize, usize)>> {
        let mut searched = self.start;
        loop {
            if let Some(i) = memchr::memchr(b'\n', &self.buf[searched..self.end]) {
                let line = (self.start, searched + i);
                self.start = searched + i + 1;
                self.line += 1;
                return Ok(Some(line));
            }
            if self.eof {
                if self.start == self.end {
                    return Ok(None);
                }
                let line = (self.start, self.end);
                self.start = self.end;
                self.line += 1;
                return Ok(Some(line));
            }
            searched = self.end - self.start;
            self.refill()?;
        }
    }

    /// Moves the bytes not taken to the front of `buf` and reads more after them, growing `buf` when
    /// they fill it.
    fn refill(&mut self) -> io::Result<()> {
        self.buf.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
        if self.end == self.buf.len() {
            let grown = (self.buf.len() * 2).max(BUFFER);
            if self.buf.try_reserve_exact(grown - self.buf.len()).is_err() {
                self.wanted = grown;
                return Err(ErrorKind::OutOfMemory.into());
            }
            self.buf.resize(grown, 0);
        }
        loop {
            match self.reader.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(());
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(());
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// The text of the field `field` of the JSON object `line` by serde_json: None when the object
/// lacks the field, an error when the line is not such an object. A text with escapes is unescaped
/// into `scratch`; when `scratch` cannot grow, `out_of_memory` is set and the error says nothing.
pub(super) fn parse_line<'a>(
    line: &'a str,
    field: &str,
    scratch: &mut String,
    out_of_memory: &Cell<bool>,
) -> serde_json::Result<Option<Text<'a>>> {
    out_of_memory.set(false);
    let seed = RecordSeed {
        field,
        scratch,
        out_of_memory,
    };
    let mut json = serde_json::Deserializer::from_str(line);
    seed.deserialize(&mut json).and_then(|text| {
        json.end()?;
        Ok(text)
    })
}

/// What is wrong with a line, from serde_json's error: its message without serde's position (the
/// line is one line of the file, and serde would call it line 1), and the column where JSON syntax
/// broke.
fn describe(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let position = format!(" at line {} column {}", e.line(), e.column());
    let message = text.strip_suffix(&position).unwrap_or(&text);
    match e.classify() {
        serde_json::error::Category::Data => message.to_string(),
        _ => format!("invalid JSON: {message} at column {}", e.column()),
    }
}

/// What a JSON value is, for messages: "a number", "a list", ...
struct Unexpected<'a>(serde::de::Unexpected<'a>);

impl fmt::Display for Unexpected<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use serde::de::Unexpected as U;
        f.write_str(match self.0 {
            U::Bool(_) => "a boolean",
            U::Unsigned(_) | U::Signed(_) | U::Float(_) => "a number",
            U::Str(_) => "a string",
            U::Unit => "null",
            U::Seq => "a list",
            U::Map => "an object",
            _ => "not a string",
        })
    }
}

/// The value of the text field of one record: Some(text) when the line is an object that has it.
struct RecordSeed<'a> {
    field: &'a str,
    scratch: &'a mut String,
    out_of_memory: &'a Cell<bool>,
}

impl<'de> DeserializeSeed<'de> for RecordSeed<'_> {
    type Value = Option<Text<'de>>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

/// The visitor methods that refuse a boolean, a number, null and a list, naming what the value is
/// (`self.refused(what)` makes the message); each visitor adds the methods of what it takes.
macro_rules! refuse_others {
    ($de:lifetime) => {
        fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Self::Value, E> {
            Err(E::custom(
                self.refused(Unexpected(serde::de::Unexpected::Bool(v))),
            ))
        }

        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Err(E::custom(
                self.refused(Unexpected(serde::de::Unexpected::Signed(v))),
            ))
        }

        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Err(E::custom(
                self.refused(Unexpected(serde::de::Unexpected::Unsigned(v))),
            ))
        }

        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Err(E::custom(
                self.refused(Unexpected(serde::de::Unexpected::Float(v))),
            ))
        }

        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Err(E::custom(
                self.refused(Unexpected(serde::de::Unexpected::Unit)),
            ))
        }

        fn visit_seq<A: SeqAccess<$de>>(self, _: A) -> Result<Self::Value, A::Error> {
            Err(A::Error::custom(
                self.refused(Unexpected(serde::de::Unexpected::Seq)),
            ))
        }
    };
}

impl<'de> Visitor<'de> for RecordSeed<'_> {
    type Value = Option<Text<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut text = None;
        while let Some(is_field) = map.next_key_seed(KeyIs(self.field))? {
            if is_field {
                text = Some(map.next_value_seed(TextSeed {
                    field: self.field,
                    scratch: &mut *self.scratch,
                    out_of_memory: self.out_of_memory,
                })?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(text)
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Err(E::custom(
            self.refused(Unexpected(serde::de::Unexpected::Str(v))),
        ))
    }

    refuse_others!('de);
}

impl RecordSeed<'_> {
    fn refused(&self, what: Unexpected<'_>) -> String {
        format!("the line is {what}, not a JSON object")
    }
}

/// Whether a key is the text field (compared without building the key).
struct KeyIs<'a>(&'a str);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<bool, E> {
        Ok(key == self.0)
    }
}

/// The text field's value, which must be a string.
struct TextSeed<'a> {
    field: &'a str,
    scratch: &'a mut String,
    out_of_memory: &'a Cell<bool>,
}

impl<'de> DeserializeSeed<'de> for TextSeed<'_> {
    type Value = Text<'de>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Text<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TextSeed<'_> {
    type Value = Text<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E: serde::de::Error>(self, text: &'de str) -> Result<Text<'de>, E> {
        Ok(Text::Borrowed(text))
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Text<'de>, E> {
        self.scratch.clear();
        if self.scratch.try_reserve(text.len()).is_err() {
            self.out_of_memory.set(true);
            return Err(E::custom("out of memory"));
        }
        self.scratch.push_str(text);
        Ok(Text::Scratch)
    }

    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<Text<'de>, A::Error> {
        Err(A::Error::custom(
            self.refused(Unexpected(serde::de::Unexpected::Map)),
        ))
    }

    refuse_others!('de);
}

impl TextSeed<'_> {
    fn refused(&self, what: Unexpected<'_>) -> String {
        format!("field {:?} is {what}, not a string", self.field)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every record of `input` read with buffers of at least `BUFFER`: texts, or "!why" for bad ones.
    fn records(input: &[u8], field: &str) -> Vec<(u64, String)> {
        let mut lines = JsonLines::new(input, field);
        let mut out = Vec::new();
        loop {
            let item = match lines.next_record().unwrap() {
                Record::Text(text) => text.to_string(),
                Record::Bad(why) => format!("!{why}"),
                Record::End => return out,
            };
            out.push((lines.line(), item));
        }
    }

    #[test]
    fn texts_are_unescaped_exactly() {
        let input = concat!(
            "{\"id\": 1, \"text\": \"plain text\"}\n",
            "{\"text\": \"tab\\tquote\\\" slash\\/ back\\\\ nl\\n \\u00e9\\ud83d\\ude00\", \"x\": [1, {\"text\": 2}]}\r\n",
            "  \t\r\n",
            "\n",
            "{\"meta\": {\"a\": null}, \"t\\u0065xt\": \"escaped key\", \"n\": -1.5e+300, \"big\": 1e999}\n",
            "{\"text\": \"first\", \"text\": \"last wins\"}",
        );
        assert_eq!(
            records(input.as_bytes(), "text"),
            [
                (1, "plain text".to_string()),
                (
                    2,
                    "tab\tquote\" slash/ back\\ nl\n \u{e9}\u{1f600}".to_string()
                ),
                (5, "escaped key".to_string()),
                (6, "last wins".to_string()),
            ]
        );
    }

    #[test]
    fn a_byte_order_mark_starts_the_first_line_only() {
        let input = "\u{feff}{\"text\": \"a\"}\n\u{feff}{\"text\": \"b\"}\n";
        let got = records(input.as_bytes(), "text");
        assert_eq!(got[0], (1, "a".to_string()));
        assert!(
            got[1]
                .1
                .starts_with("!invalid JSON: expected value at column 1"),
            "{got:?}"
        );
    }

    #[test]
    fn bad_records_say_what_is_wrong() {
        let cases: [(&[u8], &str); 13] = [
            (b"{\"text\": 5}", "field \"text\" is a number, not a string"),
            (b"{\"text\": null}", "field \"text\" is null, not a string"),
            (
                b"{\"text\": [\"a\"]}",
                "field \"text\" is a list, not a string",
            ),
            (
                b"{\"text\": {}}",
                "field \"text\" is an object, not a string",
            ),
            (b"{\"body\": \"x\"}", "no field \"text\""),
            (b"[1, 2]", "the line is a list, not a JSON object"),
            (b"\"text\"", "the line is a string, not a JSON object"),
            (
                b"{\"text\": \"a\"} x",
                "invalid JSON: trailing characters at column 15",
            ),
            (
                b"{\"text\": \"a\"",
                "invalid JSON: EOF while parsing an object at column 12",
            ),
            (
                b"{\"text\": \"\\ud800\"}",
                "invalid JSON: unexpected end of hex escape at column 17",
            ),
            (
                b"{\"text\": NaN}",
                "invalid JSON: expected value at column 10",
            ),
            (
                b"{\"text\": \"\\udc00 \"}",
                "invalid JSON: lone leading surrogate in hex escape at column 16",
            ),
            (
                b"{\"text\": \"caf\xe9\"}",
                "invalid UTF-8 at byte 13 of the line; the input must be UTF-8 text",
            ),
        ];
        for (line, why) in cases {
            let mut input = line.to_vec();
            input.extend_from_slice(b"\n{\"text\": \"next\"}\n");
            assert_eq!(
                records(&input, "text"),
                [(1, format!("!{why}")), (2, "next".to_string())],
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }

    #[test]
    fn lines_longer_than_the_buffer_are_read_whole() {
        let long = "word ".repeat(BUFFER);
        let input = format!("{{\"text\": \"{long}\"}}\n{{\"text\": \"short\"}}");
        let got = records(input.as_bytes(), "text");
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].1, long);
        assert_eq!(got[1], (2, "short".to_string()));
    }

    #[test]
    fn read_errors_are_returned() {
        struct Broken;
        impl Read for Broken {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::other("disk on fire"))
            }
        }
        let mut lines = JsonLines::new(Broken, "text");
        assert_eq!(
            lines.next_record().err().unwrap().to_string(),
            "disk on fire"
        );
    }
}
