//! The file `encode_file` writes, opened so that no output destroys anything the user did not ask to
//! replace.
//!
//! - A regular file (or a path that does not exist yet) is written through a temporary file beside it,
//!   renamed over it only when everything succeeded: it is then the old file or the whole new one, never
//!   a partial write. The temporary file's name is short (a long output name still fits the file
//!   system's limit) and unique to the call (created with `O_EXCL`, a random name), so two calls writing
//!   the same output never write into each other's file. A new file gets the usual mode under the umask;
//!   a replaced file keeps its mode. A symbolic link stays a link: its target is replaced.
//! - A device (`/dev/null`) is written directly: a rename would replace the device node with a regular
//!   file. A `.npy` header holds the array's length, known only at the end, so the output must be able
//!   to seek back to it: pipes, sockets and terminals are refused before anything is written.
//! - The input itself (same device and inode: `./a.txt`, a hard link) and directories are refused before
//!   anything is written.
//!
//! Every error names the path the caller gave, not the temporary file.

use std::fs::{self, File, OpenOptions};
use std::hash::{BuildHasher, RandomState};
use std::io::{self, ErrorKind, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf, MAIN_SEPARATOR};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

/// An output being written; dropping it before [`Output::commit`] removes the temporary file.
pub struct Output {
    /// The path the caller gave, which errors name.
    path: PathBuf,
    /// The temporary file that replaces the output at the end; None when writing directly (a device).
    temp: Option<TempFile>,
}

impl Output {
    /// Opens the output `path` of a call that reads the file `input` (`input_meta` its metadata).
    pub fn open(path: &Path, input_meta: &fs::Metadata) -> Result<(Output, File)> {
        let fail = |e: io::Error| Error::io(path, e);
        let is_a_directory = || fail(io::Error::from_raw_os_error(libc::EISDIR));
        if path
            .as_os_str()
            .to_string_lossy()
            .ends_with(['/', MAIN_SEPARATOR])
        {
            return Err(is_a_directory());
        }
        let existing = match fs::metadata(path) {
            Ok(meta) => Some(meta),
            Err(e) if e.kind() == ErrorKind::NotFound => None,
            Err(e) => return Err(fail(e)),
        };
        let Some(meta) = existing else {
            let (temp, file) = TempFile::create(path, None).map_err(fail)?;
            return Ok((Self::temp(path, temp), file));
        };
        if same_file(&meta, input_meta) {
            return Err(Error::OutputIsInput(path.to_path_buf()));
        }
        if meta.is_dir() {
            return Err(is_a_directory());
        }
        if meta.is_file() {
            // Through a symbolic link, the link's target is what gets replaced.
            let target = fs::canonicalize(path).map_err(fail)?;
            let (temp, file) = TempFile::create(&target, Some(meta.permissions())).map_err(fail)?;
            return Ok((Self::temp(path, temp), file));
        }
        let unseekable = || {
            fail(io::Error::other(
                "cannot write a .npy file to a pipe, socket or terminal: its header holds the \
                 array's length, known only at the end; write to a file",
            ))
        };
        if is_fifo_or_socket(&meta) {
            // Refused before opening: opening a pipe with no reader would wait for one.
            return Err(unseekable());
        }
        let mut file = OpenOptions::new().write(true).open(path).map_err(fail)?;
        file.seek(SeekFrom::Start(0)).map_err(|_| unseekable())?;
        let output = Output {
            path: path.to_path_buf(),
            temp: None,
        };
        Ok((output, file))
    }

    fn temp(path: &Path, temp: TempFile) -> Output {
        Output {
            path: path.to_path_buf(),
            temp: Some(temp),
        }
    }

    /// Puts the written file in place (the file must be closed, so that close errors were seen).
    pub fn commit(self) -> Result<()> {
        // No fsync: the rename makes the output appear whole or not at all to every reader, which is
        // the guarantee; forcing gigabytes to disk first took seconds and protects only against power
        // loss.
        match self.temp {
            Some(temp) => temp.rename().map_err(|e| Error::io(&self.path, e)),
            None => Ok(()),
        }
    }
}

/// A file written under a temporary name beside its target, and renamed to the target once whole;
/// dropping it before [`TempFile::rename`] removes it.
pub(crate) struct TempFile {
    temp: PathBuf,
    target: PathBuf,
    /// Set once renamed: nothing left to remove.
    renamed: bool,
}

impl TempFile {
    /// Creates a new, uniquely named temporary file beside `target`, with mode `permissions` (those of
    /// the file it will replace) or, for a new file, the usual mode under the umask.
    pub(crate) fn create(
        target: &Path,
        permissions: Option<fs::Permissions>,
    ) -> io::Result<(TempFile, File)> {
        static CALLS: AtomicU64 = AtomicU64::new(0);
        let folder = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        loop {
            // Random (RandomState is seeded per process and changes per instance), and the call
            // count besides; `create_new` (O_EXCL) makes it unique whatever the odds.
            let n = RandomState::new().hash_one(CALLS.fetch_add(1, Ordering::Relaxed));
            let temp = folder.join(format!(".bp-{n:016x}.tmp"));
            match OpenOptions::new().write(true).create_new(true).open(&temp) {
                Ok(file) => {
                    let temp = TempFile {
                        temp,
                        target: target.to_path_buf(),
                        renamed: false,
                    };
                    if let Some(permissions) = permissions {
                        file.set_permissions(permissions)?;
                    }
                    return Ok((temp, file));
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// The temporary file's path.
    pub(crate) fn path(&self) -> &Path {
        &self.temp
    }

    /// Renames the file (closed, so that close errors were seen) to its target.
    pub(crate) fn rename(mut self) -> io::Result<()> {
        fs::rename(&self.temp, &self.target)?;
        self.renamed = true;
        Ok(())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.renamed {
            let _ = fs::remove_file(&self.temp);
        }
    }
}

#[cfg(unix)]
fn same_file(a: &fs::Metadata, b: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    (a.dev(), a.ino()) == (b.dev(), b.ino())
}

#[cfg(not(unix))]
fn same_file(_: &fs::Metadata, _: &fs::Metadata) -> bool {
    false
}

#[cfg(unix)]
fn is_fifo_or_socket(meta: &fs::Metadata) -> bool {
    use std::os::unix::fs::FileTypeExt;
    meta.file_type().is_fifo() || meta.file_type().is_socket()
}

#[cfg(not(unix))]
fn is_fifo_or_socket(_: &fs::Metadata) -> bool {
    false
}

/// The most bytes [`write_in_slices`] hands the kernel in one write.
pub(crate) const WRITE_SLICE: usize = 256 << 10;

/// Writes all of `bytes` to `file`, [`WRITE_SLICE`] bytes at a time: the kernel takes writes of a few
/// hundred kilobytes into the page cache at a steady cost, and writes of megabytes at several times
/// that, and at a cost that varies from write to write (DESIGN.md, "Writes of 256 KB").
pub(crate) fn write_in_slices(file: &mut impl Write, bytes: &[u8]) -> io::Result<()> {
    bytes
        .chunks(WRITE_SLICE)
        .try_for_each(|slice| file.write_all(slice))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("bytepair-output-{}-{name}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn bytes_are_written_whole_in_slices_of_at_most_write_slice() {
        /// Keeps what it is given, at most `most` bytes a call, and the size of each call.
        struct Short {
            kept: Vec<u8>,
            calls: Vec<usize>,
            most: usize,
        }
        impl Write for Short {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                let n = buf.len().min(self.most);
                self.kept.extend_from_slice(&buf[..n]);
                self.calls.push(buf.len());
                Ok(n)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let bytes: Vec<u8> = (0..2 * WRITE_SLICE + 1000)
            .map(|i| (i % 251) as u8)
            .collect();
        for most in [usize::MAX, 100_000] {
            let mut out = Short {
                kept: Vec::new(),
                calls: Vec::new(),
                most,
            };
            write_in_slices(&mut out, &bytes).unwrap();
            assert!(out.kept == bytes, "the bytes differ");
            assert!(
                out.calls.iter().all(|&n| n <= WRITE_SLICE),
                "{:?}",
                out.calls
            );
            if most == usize::MAX {
                assert_eq!(out.calls, [WRITE_SLICE, WRITE_SLICE, 1000]);
            }
        }
        write_in_slices(&mut Vec::new(), &[]).unwrap();
    }

    #[test]
    fn temporary_names_are_short_and_unique_per_call() {
        let dir = folder("unique");
        let input = fs::metadata(&dir).unwrap();
        let long = dir.join("x".repeat(250));
        let (a, _fa) = Output::open(&long, &input).unwrap();
        let (b, _fb) = Output::open(&long, &input).unwrap();
        let (ta, tb) = (
            a.temp.as_ref().unwrap().path(),
            b.temp.as_ref().unwrap().path(),
        );
        assert_ne!(ta, tb);
        assert!(ta.file_name().unwrap().len() < 30);
        drop((a, b));
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            0,
            "dropping removes the temporary files"
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_input_and_directories_are_refused() {
        let dir = folder("refused");
        let input = dir.join("in.txt");
        fs::write(&input, "text").unwrap();
        let meta = fs::metadata(&input).unwrap();
        let err = Output::open(&input, &meta).err().unwrap();
        assert!(matches!(err, Error::OutputIsInput(ref p) if p == &input));
        for d in [dir.clone(), dir.join("sub/")] {
            let err = Output::open(&d, &meta).err().unwrap();
            assert!(
                matches!(err, Error::Io { ref path, ref source } if path == &d && source.raw_os_error() == Some(libc::EISDIR)),
                "{d:?}: {err}"
            );
        }
        assert_eq!(fs::read(&input).unwrap(), b"text");
        fs::remove_dir_all(dir).unwrap();
    }
}
