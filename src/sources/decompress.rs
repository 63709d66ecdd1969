//! Reading a source file through its decompressor, with errors that say what went wrong: the file
//! could not be read ([`Error::Io`]), or its compressed stream is corrupt or truncated
//! ([`Error::CorruptStream`], which `errors="skip"` can skip).
//!
//! A decoder reports both kinds as an `io::Error`, so the file is read through [`Tracked`], which
//! remembers whether the file itself failed, and counts the bytes read from it for progress reports.
//! Every decoder reads concatenated streams (multi-member gzip as `pigz` and BGZF write, several zstd
//! frames, several xz streams), and a stream that ends before its end marker is an error: a truncated
//! download must not pass for a shorter corpus.

use std::fs::File;
use std::io::{self, BufReader, ErrorKind, Read};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use super::kind::Compression;
use crate::error::Error;

/// The bytes of compressed input each decoder reads at once.
const READ_BUFFER: usize = 256 << 10;

/// What the decoder's input has seen: the bytes read from the file, and whether reading it failed.
/// Atomics, so that a reader can move between threads (the encoder's readers are shared by its
/// workers); only one thread reads a file at a time.
#[derive(Default)]
struct Seen {
    bytes: AtomicU64,
    failed: AtomicBool,
}

/// The file under a decoder, noting what it read in [`Seen`].
struct Tracked {
    file: File,
    seen: Arc<Seen>,
}

impl Read for Tracked {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.file.read(buf) {
            Ok(n) => {
                self.seen.bytes.fetch_add(n as u64, Ordering::Relaxed);
                Ok(n)
            }
            Err(e) => {
                if e.kind() != ErrorKind::Interrupted {
                    self.seen.failed.store(true, Ordering::Relaxed);
                }
                Err(e)
            }
        }
    }
}

/// What is known of a file being decompressed: how much of it was read, and what its errors mean.
pub(crate) struct Probe {
    seen: Arc<Seen>,
    compression: Compression,
}

/// The decompressed text of `file`, read through the decoder for `compression` (on one thread), and
/// its probe.
pub(crate) fn open(file: File, compression: Compression) -> (Box<dyn Read + Send>, Probe) {
    let seen = Arc::new(Seen::default());
    let tracked = Tracked {
        file,
        seen: seen.clone(),
    };
    let reader: Box<dyn Read + Send> = match compression {
        Compression::None => Box::new(tracked),
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(
            BufReader::with_capacity(READ_BUFFER, tracked),
        )),
        // `with_buffer` decodes every frame until the input ends, and fails when it ends inside one.
        Compression::Zstd => match zstd::stream::read::Decoder::with_buffer(
            BufReader::with_capacity(READ_BUFFER, tracked),
        ) {
            Ok(decoder) => Box::new(decoder),
            // Only when libzstd cannot allocate its context: reported at the first read.
            Err(e) => Box::new(Failed(Some(e))),
        },
        Compression::Xz => Box::new(liblzma::bufread::XzDecoder::new_multi_decoder(
            BufReader::with_capacity(READ_BUFFER, tracked),
        )),
    };
    (reader, Probe { seen, compression })
}

impl Probe {
    /// The bytes of the file (compressed) read so far.
    pub(crate) fn file_bytes(&self) -> u64 {
        self.seen.bytes.load(Ordering::Relaxed)
    }

    /// The engine error for `e`, an error of reading the decompressed text of `path`: the file's own
    /// error, out of memory (a reader above could not grow a buffer; `chunk_size` is what it wanted),
    /// or a corrupt or truncated stream.
    pub(crate) fn error(&self, path: &Path, e: io::Error, chunk_size: usize) -> Error {
        if self.seen.failed.load(Ordering::Relaxed) || e.kind() == ErrorKind::OutOfMemory {
            return Error::read(path, e, chunk_size);
        }
        match self.compression.name() {
            Some(format) => Error::CorruptStream {
                path: path.to_path_buf(),
                format,
                why: match e.kind() {
                    ErrorKind::UnexpectedEof => "the file ends inside the stream".to_string(),
                    _ => e.to_string(),
                },
            },
            None => Error::io(path, e),
        }
    }
}

/// A reader whose first read fails with the error it holds.
struct Failed(Option<io::Error>);

impl Read for Failed {
    fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
        match self.0.take() {
            Some(e) => Err(e),
            None => Ok(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn temp_file(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let path =
            std::env::temp_dir().join(format!("bytepair-decompress-{}-{name}", std::process::id()));
        File::create(&path).unwrap().write_all(bytes).unwrap();
        path
    }

    fn compress(compression: Compression, text: &[u8]) -> Vec<u8> {
        match compression {
            Compression::None => text.to_vec(),
            Compression::Gzip => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                e.write_all(text).unwrap();
                e.finish().unwrap()
            }
            // With the checksum, as the zstd tool writes it: without one, a changed byte of
            // literal text decodes without an error.
            Compression::Zstd => {
                let mut e = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
                e.include_checksum(true).unwrap();
                e.write_all(text).unwrap();
                e.finish().unwrap()
            }
            Compression::Xz => {
                let mut e = liblzma::write::XzEncoder::new(Vec::new(), 1);
                e.write_all(text).unwrap();
                e.finish().unwrap()
            }
        }
    }

    /// Reads the file `bytes` through the decoder for `compression`: the text, or the engine error.
    fn read(name: &str, compression: Compression, bytes: &[u8]) -> Result<Vec<u8>, Error> {
        let path = temp_file(name, bytes);
        let (mut input, probe) = open(File::open(&path).unwrap(), compression);
        let mut text = Vec::new();
        let result = input.read_to_end(&mut text);
        std::fs::remove_file(&path).unwrap();
        if result.is_ok() {
            assert_eq!(probe.file_bytes(), bytes.len() as u64);
        }
        result.map(|_| text).map_err(|e| probe.error(&path, e, 1))
    }

    const COMPRESSED: [Compression; 3] = [Compression::Gzip, Compression::Zstd, Compression::Xz];

    #[test]
    fn concatenated_streams_are_read_whole() {
        for compression in COMPRESSED {
            let mut bytes = compress(compression, "first stream ".repeat(1000).as_bytes());
            bytes.extend(compress(compression, b"and the second"));
            let text = read("concat", compression, &bytes).unwrap();
            assert_eq!(text.len(), 13 * 1000 + 14, "{compression:?}");
            assert!(text.ends_with(b"stream and the second"));
        }
    }

    #[test]
    fn truncated_and_corrupt_streams_are_errors_naming_the_file_and_format() {
        let text = "some text that compresses, ".repeat(5000);
        for compression in COMPRESSED {
            let bytes = compress(compression, text.as_bytes());
            let name = compression.name().unwrap();
            // Cut anywhere: in the header, the data or the trailer with its checksum.
            for cut in [5, bytes.len() / 2, bytes.len() - 1] {
                let e = read("truncated", compression, &bytes[..cut])
                    .map(|_| ())
                    .unwrap_err();
                let Error::CorruptStream { path, format, .. } = &e else {
                    panic!("{compression:?} cut at {cut}: {e}")
                };
                assert_eq!(*format, name);
                assert!(path.to_string_lossy().ends_with("truncated"));
                assert!(e
                    .to_string()
                    .contains(&format!("corrupt or truncated {name}")));
            }
            let mut corrupt = bytes.clone();
            let middle = corrupt.len() / 2;
            corrupt[middle] ^= 0x55;
            corrupt[middle + 1] ^= 0xAA;
            let e = read("corrupt", compression, &corrupt)
                .map(|_| ())
                .unwrap_err();
            assert!(
                matches!(e, Error::CorruptStream { .. }),
                "{compression:?}: {e}"
            );
            let mut trailing = bytes.clone();
            trailing.extend_from_slice(b"not a stream");
            let e = read("trailing", compression, &trailing)
                .map(|_| ())
                .unwrap_err();
            assert!(
                matches!(e, Error::CorruptStream { .. }),
                "{compression:?}: {e}"
            );
        }
    }

    #[test]
    fn an_uncompressed_file_is_read_as_is() {
        assert_eq!(read("plain", Compression::None, b"abc").unwrap(), b"abc");
    }
}
