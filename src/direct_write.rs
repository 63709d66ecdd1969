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
//! the end (less than a block) after turning `O_DIRECT` off. It is used only on local disks' file
//! systems that do direct I/O well (ext4, XFS): on NFS and cluster file systems each direct write waits
//! for the server, where buffered writes are pipelined, and tmpfs or btrfs gain nothing from it. A
//! write refused with `EINVAL` (a device of larger blocks), or one cut short to a length that is not
//! whole blocks (a file size limit), turns `O_DIRECT` off and is written again, or on, ordinarily.
//! Elsewhere than Linux every write is an ordinary one.
//!
//! Invariant: the file holds exactly the bytes given, in order, whichever way each was written, once
//! [`DirectWriter::finish`] returns; after an error it holds a prefix of them, and the writer refuses
//! any further write (the bytes it still holds would land at the wrong offset).

use std::fs::File;
use std::io::{self, Write};

use crate::error::{try_vec, AllocError};

/// The alignment of the buffer, and of each direct write's length and offset.
const BLOCK: usize = 4096;

/// Bytes gathered before a direct write: large enough that a write's fixed cost is small against its
/// transfer, small enough to stay in cache while it fills.
pub(crate) const DIRECT_BUFFER: usize = 1 << 20;

/// A file written a buffer at a time with `O_DIRECT` where the file system does it well, and with
/// ordinary writes elsewhere. Dropping it without [`Self::finish`] loses the bytes still in the buffer.
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
    /// Set by a failed write: the writer refuses to go on.
    failed: bool,
    /// What the next writes return instead of writing (the tests' way to a refused or short write).
    #[cfg(test)]
    script: Vec<Scripted>,
}

impl DirectWriter {
    /// Writes `file` (open for writing, at offset 0) through a buffer of `capacity` bytes, around the
    /// page cache when `direct` is asked and the file system does direct I/O well. `capacity` must be a
    /// positive multiple of [`BLOCK`] (it panics otherwise). Fails when the buffer cannot be allocated.
    pub(crate) fn new(
        file: File,
        capacity: usize,
        direct: bool,
    ) -> Result<DirectWriter, AllocError> {
        assert!(capacity > 0 && capacity % BLOCK == 0, "whole blocks");
        let buffer = try_vec(0u8, capacity + BLOCK)?;
        let start = (BLOCK - buffer.as_ptr() as usize % BLOCK) % BLOCK;
        let mut writer = DirectWriter {
            file,
            buffer,
            start,
            capacity,
            filled: 0,
            direct: false,
            failed: false,
            #[cfg(test)]
            script: Vec::new(),
        };
        writer.direct =
            direct && does_direct_io_well(&writer.file) && writer.set_direct(true).is_ok();
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

    /// Appends `bytes`. Fails as `write` fails (a full disk, an I/O error), and after such a failure.
    pub(crate) fn write_all(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        self.refuse_after_failure()?;
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

    fn refuse_after_failure(&self) -> io::Result<()> {
        match self.failed {
            true => Err(io::Error::other("an earlier write to this file failed")),
            false => Ok(()),
        }
    }

    /// Writes the buffer's whole blocks, and moves what is left of it (less than a block) to its start.
    fn flush_blocks(&mut self) -> io::Result<()> {
        let whole = self.filled / BLOCK * BLOCK;
        let mut done = 0;
        while done < whole {
            let (from, to) = (self.start + done, self.start + whole);
            match self.write_once(from, to) {
                Ok(0) => return self.fail(io::Error::from(io::ErrorKind::WriteZero)),
                // A short write leaves the next one unaligned when it is not whole blocks: the rest
                // goes by ordinary writes.
                Ok(n) => {
                    done += n;
                    if n % BLOCK != 0 && self.direct {
                        self.set_direct(false).or_else(|e| self.fail(e))?;
                        self.direct = false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // The file system took O_DIRECT, but not this write (a device of larger blocks).
                Err(e) if self.direct && e.raw_os_error() == Some(libc::EINVAL) => {
                    self.set_direct(false).or_else(|e| self.fail(e))?;
                    self.direct = false;
                }
                Err(e) => return self.fail(e),
            }
        }
        self.buffer
            .copy_within(self.start + whole..self.start + self.filled, self.start);
        self.filled -= whole;
        Ok(())
    }

    /// Marks the writer failed and returns `e`.
    fn fail<T>(&mut self, e: io::Error) -> io::Result<T> {
        self.failed = true;
        Err(e)
    }

    /// One `write` of `buffer[from..to]`.
    fn write_once(&mut self, from: usize, to: usize) -> io::Result<usize> {
        #[cfg(test)]
        if let Some(scripted) = self.script.pop() {
            return match scripted {
                Scripted::Error(code) => Err(io::Error::from_raw_os_error(code)),
                Scripted::Short(n) => self.file.write(&self.buffer[from..from + n.min(to - from)]),
            };
        }
        self.file.write(&self.buffer[from..to])
    }

    /// Writes what is left and returns the file, with `O_DIRECT` off (so that it can be written
    /// anywhere again, as a header is) and at its end. Fails as [`Self::write_all`] does.
    pub(crate) fn finish(mut self) -> io::Result<File> {
        self.refuse_after_failure()?;
        self.flush_blocks()?;
        if self.direct {
            self.set_direct(false)?;
        }
        let tail = &self.buffer[self.start..self.start + self.filled];
        self.file.write_all(tail)?;
        Ok(self.file)
    }
}

/// Whether `file` is on a file system that does direct I/O well: a local disk's ext4 or XFS (Linux).
fn does_direct_io_well(file: &File) -> bool {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let mut stats = std::mem::MaybeUninit::<libc::statfs>::uninit();
        // SAFETY: fstatfs fills the struct it is given, on a descriptor `file` owns.
        if unsafe { libc::fstatfs(file.as_raw_fd(), stats.as_mut_ptr()) } != 0 {
            return false;
        }
        // SAFETY: fstatfs succeeded, so it filled the struct.
        let kind = unsafe { stats.assume_init() }.f_type;
        #[allow(
            clippy::unnecessary_cast,
            reason = "the field and the constants have other types on other architectures"
        )]
        let well =
            [libc::EXT4_SUPER_MAGIC as i64, libc::XFS_SUPER_MAGIC as i64].contains(&(kind as i64));
        well
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = file;
        false
    }
}

/// A write the tests make [`DirectWriter::write_once`] return.
#[cfg(test)]
#[derive(Clone, Copy, Debug)]
enum Scripted {
    /// Fails with this `errno`, writing nothing.
    Error(i32),
    /// Writes at most this many bytes.
    Short(usize),
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

    fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
        let mut state = seed;
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect()
    }

    /// Whether `file` has `O_DIRECT` set.
    #[cfg(target_os = "linux")]
    fn has_o_direct(file: &File) -> bool {
        use std::os::fd::AsRawFd;
        // SAFETY: fcntl F_GETFL on a descriptor `file` owns.
        let flags = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFL) };
        flags & libc::O_DIRECT != 0
    }

    /// Writes `bytes` through a writer of `capacity` bytes into `path`, in chunks of random lengths
    /// (some longer than the buffer); returns whether the writes went around the page cache.
    fn write(path: &Path, capacity: usize, direct: bool, bytes: &[u8]) -> bool {
        let file = File::create(path).unwrap();
        let mut writer = DirectWriter::new(file, capacity, direct).unwrap();
        let was_direct = writer.is_direct();
        #[cfg(target_os = "linux")]
        assert_eq!(has_o_direct(&writer.file), was_direct);
        let lengths = random_bytes(bytes.len(), 3);
        let mut rest = bytes;
        let mut k = 0;
        while !rest.is_empty() {
            let n = (lengths[k] as usize * capacity / 100).clamp(1, rest.len());
            writer.write_all(&rest[..n]).unwrap();
            rest = &rest[n..];
            k += 1;
        }
        let file = writer.finish().unwrap();
        #[cfg(target_os = "linux")]
        assert!(!has_o_direct(&file), "O_DIRECT is off after finish");
        drop(file);
        was_direct
    }

    #[test]
    fn the_file_holds_the_bytes_given_whatever_their_lengths_and_the_way_taken() {
        let dir = folder("lengths");
        // The folder's file system does direct I/O well on the machines the tests run on (ext4); then
        // the writer must take it when asked.
        let direct_here = does_direct_io_well(&File::create(dir.join("probe")).unwrap());
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
                let bytes = random_bytes(total, total as u64 + 1);
                let path = dir.join(format!("{total}-{direct}"));
                let was_direct = write(&path, capacity, direct, &bytes);
                assert_eq!(
                    std::fs::read(&path).unwrap(),
                    bytes,
                    "{total} bytes, {direct}"
                );
                assert_eq!(was_direct, direct && direct_here);
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Writes 5 blocks and 3 bytes through a writer of 2 blocks that is (or believes it is) direct,
    /// the first writes answered by `script` (in order); returns the writer after the last write.
    #[cfg(target_os = "linux")]
    fn scripted(dir: &Path, name: &str, script: &[Scripted]) -> (DirectWriter, Vec<u8>) {
        let mut writer =
            DirectWriter::new(File::create(dir.join(name)).unwrap(), 2 * BLOCK, true).unwrap();
        // The writer takes the direct path's decisions while its writes are ordinary ones, whatever
        // the file system: a scripted short write is then really as short as scripted.
        writer.set_direct(false).unwrap();
        writer.direct = true;
        writer.script = script.iter().rev().copied().collect();
        let bytes = random_bytes(5 * BLOCK + 3, name.len() as u64);
        (writer, bytes)
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn refused_cut_short_or_interrupted_writes_lose_nothing() {
        let dir = folder("scripted");
        let cases: [(&str, &[Scripted], bool); 4] = [
            // A device of larger blocks refuses the write: written again, ordinarily, from there on.
            ("refused", &[Scripted::Error(libc::EINVAL)], false),
            // Cut short to a length that is not whole blocks: the rest ordinarily.
            ("short", &[Scripted::Short(1000)], false),
            // Cut short to whole blocks: the rest still direct.
            ("short-blocks", &[Scripted::Short(BLOCK)], true),
            // Interrupted before writing anything: written again.
            ("interrupted", &[Scripted::Error(libc::EINTR)], true),
        ];
        for (name, script, direct_after) in cases {
            let (mut writer, bytes) = scripted(&dir, name, script);
            writer.write_all(&bytes).unwrap();
            assert_eq!(writer.is_direct(), direct_after, "{name}");
            assert!(
                writer.script.is_empty(),
                "{name}: every scripted write was made"
            );
            drop(writer.finish().unwrap());
            assert_eq!(std::fs::read(dir.join(name)).unwrap(), bytes, "{name}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn after_a_failed_write_the_file_holds_a_prefix_and_the_writer_refuses_to_go_on() {
        let dir = folder("failed");
        // The first buffer's two blocks are written, then the disk is full.
        let script = [Scripted::Short(2 * BLOCK), Scripted::Error(libc::ENOSPC)];
        let (mut writer, bytes) = scripted(&dir, "full", &script);
        let e = writer.write_all(&bytes).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        assert!(writer.write_all(b"more").is_err());
        assert!(writer.finish().is_err());
        assert_eq!(std::fs::read(dir.join("full")).unwrap(), bytes[..2 * BLOCK]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
