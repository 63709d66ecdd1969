//! What a source file holds and how it is compressed, from its name.

use std::path::Path;

use crate::error::{Error, Result};

/// What a source file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// UTF-8 text, documents separated by the special tokens.
    Txt,
    /// One JSON object a line, its text in a field (`text_field`).
    JsonLines,
    /// Apache Parquet, its text in a string column; read by the Python layer.
    Parquet,
}

/// How a source file is compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// Not compressed.
    None,
    /// gzip (`.gz`), one member or several.
    Gzip,
    /// Zstandard (`.zst`), one frame or several.
    Zstd,
    /// xz (`.xz`), one stream or several.
    Xz,
}

impl Compression {
    /// The name of the compression in messages: None when there is none.
    pub fn name(self) -> Option<&'static str> {
        match self {
            Compression::None => None,
            Compression::Gzip => Some("gzip"),
            Compression::Zstd => Some("zstd"),
            Compression::Xz => Some("xz"),
        }
    }
}

/// A source file's format and compression, from its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceKind {
    /// What the (decompressed) file holds.
    pub format: Format,
    /// How it is compressed.
    pub compression: Compression,
}

impl SourceKind {
    /// The kind of the file at `path`, from the end of its name, in any case: `corpus.txt`,
    /// `shard-00001.jsonl.zst`, `part.json.gz`, `train-0000.parquet`. A Parquet file is compressed
    /// inside, so `.parquet.gz` and the like are refused, as is any other name
    /// ([`Error::UnknownSourceType`]).
    ///
    /// ```
    /// use bytepair::{Compression, Format, SourceKind};
    /// let kind = SourceKind::of("data/shard-00001.JSONL.zst".as_ref()).unwrap();
    /// assert_eq!((kind.format, kind.compression), (Format::JsonLines, Compression::Zstd));
    /// assert!(SourceKind::of("notes.md".as_ref()).is_err());
    /// ```
    pub fn of(path: &Path) -> Result<SourceKind> {
        let unknown = || Error::UnknownSourceType(path.to_path_buf());
        let name = path
            .file_name()
            .ok_or_else(unknown)?
            .to_string_lossy()
            .to_ascii_lowercase();
        let (rest, compression) = [
            (".gz", Compression::Gzip),
            (".zst", Compression::Zstd),
            (".xz", Compression::Xz),
        ]
        .into_iter()
        .find_map(|(suffix, c)| Some((name.strip_suffix(suffix)?, c)))
        .unwrap_or((&name, Compression::None));
        let format = [
            (".txt", Format::Txt),
            (".jsonl", Format::JsonLines),
            (".json", Format::JsonLines),
            (".parquet", Format::Parquet),
        ]
        .into_iter()
        .find_map(|(suffix, f)| rest.strip_suffix(suffix).map(|_| f))
        .ok_or_else(unknown)?;
        if format == Format::Parquet && compression != Compression::None {
            return Err(unknown());
        }
        Ok(SourceKind {
            format,
            compression,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_come_from_the_end_of_the_name() {
        let kind =
            |name: &str| SourceKind::of(Path::new(name)).map(|k| (k.format, k.compression.name()));
        assert_eq!(kind("a/b.txt").unwrap(), (Format::Txt, None));
        assert_eq!(kind("x.tar.txt.GZ").unwrap(), (Format::Txt, Some("gzip")));
        assert_eq!(
            kind("s.jsonl.zst").unwrap(),
            (Format::JsonLines, Some("zstd"))
        );
        assert_eq!(kind("s.json.xz").unwrap(), (Format::JsonLines, Some("xz")));
        assert_eq!(kind("t.Parquet").unwrap(), (Format::Parquet, None));
        for bad in [
            "README.md",
            "a.gz",
            "a.parquet.zst",
            "txt",
            "a.txt.bz2",
            "a.zst.txt.gz.x",
            "",
        ] {
            let e = SourceKind::of(Path::new(bad)).unwrap_err();
            assert!(matches!(e, Error::UnknownSourceType(_)), "{bad}");
        }
        assert!(kind("a.zst.txt").is_ok());
    }
}
