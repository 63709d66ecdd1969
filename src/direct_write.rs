//! Writing a large output file around the page cache: [`DirectWriter`].
//!
//! A buffered `write` copies every byte into the kernel's page cache, which first has to find the
//! pages: on this project's machines that cost 0.3 to 1 second of system CPU per GB, varying from run
//! to run, and a token shard set is about as large as its text. With `O_DIRECT` the device reads the
//! bytes from the process's buffer instead (0.1 s per GB), and nothing is copied or cached.
//!
//! `O_DIRECT` asks for whole blocks: the buffer's address, each write's length and its offset in the
//! file must be multiples of the device's block size ([`BLOCK`] covers 512-byte and 4 KB devices). So
//! the writer gathers bytes in an aligned buffer, writes it whole when full, and writes what is left at
//! the end (less than a block) after turning `O_DIRECT` off. A file system that does not take
//! `O_DIRECT` (tmpfs on older kernels, some network and FUSE file systems) refuses it with `EINVAL`,
//! when it is asked for or at the first write; the writer then goes on with ordinary writes. Elsewhere
//! than Linux every write is an ordinary one.
//!
//! Invariant: the file holds exactly the bytes given, in order, whichever way each was written, once
//! [`DirectWriter::finish`] returns.

use std::fs::File;
use std::io::{self, Write};

use crate::error::{try_vec, AllocError};

/// The alignment of the buffer, and of each direct write's length and offset.
const BLOCK: usize = 4096;

/// Bytes gathered before a direct write: large enough that a write's fixed cost is small against its
/// transfer, small enough to stay in cache while it fills.
pub(crate) const DIRECT_BUFFER: usize = 1 << 20;

/// A file written a buffer at a time with `O_DIRECT` where the file system allows it, and with ordinary
/// writes where it does not. Dropping it without [`Self::finish`] loses the bytes still in the buffer.
pub(crate) struct DirectWriter {
    file: File,
    /// The buffer's allocation: `BLOCK` bytes more than `capacity`, so that an aligned stretch of
    /// `capacity` bytes starts within its first block.
    buffer: Vec<u8>,
    /// Where the aligned stretch starts in `buffer`.
    start: usize,
    capacity: usize,
    /// Bytes gathered, from `start`.
    filled: usize,
    /// Whether writes still go around the page cache.
    direct: bool,
}

impl DirectWriter {
    /// Writes `file` (open for writing, at offset 0) through a buffer of `capacity` bytes (a multiple of
    /// [`BLOCK`]), around the page cache when `direct` is asked and the file system allows it. Fails when
    /// the buffer cannot be allocated.
    pub(crate) fn new(
        file: File,
        capacity: usize,
        direct: bool,
    ) -> Result<DirectWriter, AllocError> {
        assert!(capacity > 0 && capacity % BLOCK == 0, "whole blocks");
        let buffer = try_vec(0u8, capacity + BLOCK)?;
        let start = buffer.as_ptr().align_offset(BLOCK);
        let mut writer = DirectWriter {
            file,
            buffer,
            start,
            capacity,
            filled: 0,
            direct: false,
        };
        writer.direct = direct && writer.set_direct(true).is_ok();
        Ok(writer)
    }

    /// Whether writes go around the page cache (for the tests: which way was taken).
    #[cfg(test)]
    fn is_direct(&self) -> bool {
        self.direct
    }

    /// Turns `O_DIRECT` on or off for the file. Fails where the file system does not take it, and
    /// always elsewhere than Linux.
    fn set_direct(&self, on: bool) -> io::Result<()> {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let fd = self.file.as_raw_fd();
            // SAFETY: fcntl on a descriptor this writer owns, with flags only.
            let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
            if flags < 0 {
                return Err(io::Error::last_os_error());
            }
            let flags = match on {
                true => flags | libc::O_DIRECT,
                false => flags & !libc::O_DIRECT,
            };
            // SAFETY: as above.
            if unsafe { libc::fcntl(fd, libc::F_SETFL, flags) } < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = on;
            Err(io::Error::from(io::ErrorKind::Unsupported))
        }
    }

    /// Appends `bytes`. Fails as `write` fails (a full disk, an I/O error).
    pub(crate) fn write_all(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            let room = self.capacity - self.filled;
            let n = room.min(bytes.len());
            let at = self.start + self.filled;
            self.buffer[at..at + n].copy_from_slice(&bytes[..n]);
            self.filled += n;
            bytes = &bytes[n..];
            if self.filled == self.capacity {
                self.flush_blocks()?;
            }
        }
        Ok(())
    }

    /// Writes the buffer's whole blocks, and moves what is left of it (less than a block) to its start.
    fn flush_blocks(&mut self) -> io::Result<()> {
        let whole = self.filled / BLOCK * BLOCK;
        let mut done = 0;
        while done < whole {
            let chunk = &self.buffer[self.start + done..self.start + whole];
            match self.file.write(chunk) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
                // A short write leaves the next one unaligned when it is not whole blocks: the rest
                // goes by ordinary writes.
                Ok(n) => {
                    done += n;
                    if n % BLOCK != 0 && self.direct {
                        self.set_direct(false)?;
                        self.direct = false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // The file system took O_DIRECT when asked, but not a write: ordinary writes from here.
                Err(e) if self.direct && e.raw_os_error() == Some(libc::EINVAL) => {
                    self.set_direct(false)?;
                    self.direct = false;
                }
                Err(e) => return Err(e),
            }
        }
        self.buffer
            .copy_within(self.start + whole..self.start + self.filled, self.start);
        self.filled -= whole;
        Ok(())
    }

    /// Writes what is left and returns the file, with `O_DIRECT` off (so that it can be written
    /// anywhere again, as a header is) and at its end. Fails as [`Self::write_all`] does.
    pub(crate) fn finish(mut self) -> io::Result<File> {
        self.flush_blocks()?;
        if self.direct {
            self.set_direct(false)?;
        }
        let tail = &self.buffer[self.start..self.start + self.filled];
        self.file.write_all(tail)?;
        Ok(self.file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    fn folder(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("bp-direct-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Writes `chunks` through a writer of `capacity` bytes into `path`, and returns whether the writes
    /// went around the page cache and the file's bytes.
    fn write(path: &Path, capacity: usize, direct: bool, chunks: &[Vec<u8>]) -> (bool, Vec<u8>) {
        let file = File::create(path).unwrap();
        let mut writer = DirectWriter::new(file, capacity, direct).unwrap();
        let was_direct = writer.is_direct();
        for chunk in chunks {
            writer.write_all(chunk).unwrap();
        }
        drop(writer.finish().unwrap());
        (was_direct, std::fs::read(path).unwrap())
    }

    #[test]
    fn the_file_holds_the_bytes_given_whatever_their_lengths_and_the_way_taken() {
        let dir = folder("lengths");
        let mut state = 7u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let capacity = 4 * BLOCK;
        for total in [
            0,
            1,
            BLOCK - 1,
            BLOCK,
            BLOCK + 1,
            capacity,
            capacity + 5,
            9 * BLOCK + 77,
        ] {
            for direct in [true, false] {
                let bytes: Vec<u8> = (0..total).map(|_| next() as u8).collect();
                // In chunks of random lengths, some longer than the buffer.
                let mut chunks = Vec::new();
                let mut rest = &bytes[..];
                while !rest.is_empty() {
                    let n = (next() as usize % (2 * capacity)).min(rest.len()).max(1);
                    chunks.push(rest[..n].to_vec());
                    rest = &rest[n..];
                }
                let path = dir.join(format!("{total}-{direct}"));
                let (was_direct, written) = write(&path, capacity, direct, &chunks);
                assert_eq!(written, bytes, "{total} bytes, direct asked: {direct}");
                if !direct {
                    assert!(!was_direct);
                }
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_write_the_file_system_refuses_goes_again_as_an_ordinary_one() {
        let dir = folder("refused");
        let path = dir.join("a");
        let mut writer = DirectWriter::new(File::create(&path).unwrap(), BLOCK, true).unwrap();
        // A buffer one byte off its alignment: a direct write of it fails with EINVAL, as a write to a
        // file system that took O_DIRECT but cannot do it does.
        writer.start += 1;
        writer.write_all(&[5; 3 * BLOCK + 3]).unwrap();
        assert!(!writer.is_direct(), "ordinary writes after the refusal");
        drop(writer.finish().unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), vec![5; 3 * BLOCK + 3]);
        // tmpfs refuses O_DIRECT when asked on kernels before 6.6, and takes it since; either way the
        // bytes are whole.
        if Path::new("/dev/shm").is_dir() {
            let path = Path::new("/dev/shm").join(format!("bp-direct-{}", std::process::id()));
            let (_, written) = write(
                &path,
                BLOCK,
                true,
                &[vec![9; BLOCK + 1], vec![8; 2 * BLOCK]],
            );
            let mut expected = vec![9; BLOCK + 1];
            expected.extend(vec![8; 2 * BLOCK]);
            assert_eq!(written, expected);
            std::fs::remove_file(&path).unwrap();
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
