//! [`NpyWriter`]: writing a `.npy` array whose length is known only at the end.
//!
//! The header comes first in the file but holds the array's length, so it has a fixed size
//! ([`HEADER_LEN`], padded with spaces as the format allows) and is written last, over the space kept
//! for it.
//!
//! The data goes through the page cache with ordinary writes of at most 256 KB
//! ([`crate::output::write_in_slices`]), not `O_DIRECT`: direct I/O spares the
//! kernel's copy of each byte, but on a virtual machine the host may do it on the guest's own CPU time,
//! taken from the encoding threads (DESIGN.md has the measurements). Buffered writes leave the disk
//! write to the kernel's writeback after the call returns (as any program's ordinary writes do), and
//! the ids are still in memory when they are read back, as they usually are soon after.
//!
//! Invariant: a file that [`NpyWriter::finish`] closed without error is a valid `.npy` of the data
//! written, whose header gives its exact length.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};

/// Bytes of header: room for the 10-byte prefix and the dictionary of the largest length (76 bytes),
/// rounded up to a multiple of 64 as the `.npy` format asks.
pub(crate) const HEADER_LEN: usize = 128;

/// The `.npy` header (format 1.0) of a one-dimensional array of `len` elements of type `descr`
/// (`<u2`, `<u4`), [`HEADER_LEN`] bytes long whatever `len`.
pub(crate) fn npy_header(descr: &str, len: u64) -> Vec<u8> {
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({len},), }}");
    let mut header = b"\x93NUMPY\x01\x00".to_vec();
    header.extend_from_slice(&((HEADER_LEN - 10) as u16).to_le_bytes());
    header.extend_from_slice(dict.as_bytes());
    debug_assert!(header.len() < HEADER_LEN, "resize must pad, never cut");
    header.resize(HEADER_LEN - 1, b' ');
    header.push(b'\n');
    header
}

/// Writes the data of a `.npy` file, after a header written by [`Self::finish`].
pub(super) struct NpyWriter {
    file: File,
}

impl NpyWriter {
    /// Writes into `file`, open for writing at its start, keeping room for the header.
    pub(super) fn new(mut file: File) -> io::Result<NpyWriter> {
        file.write_all(&[0; HEADER_LEN])?;
        Ok(NpyWriter { file })
    }

    /// Appends `bytes` to the data. Callers write megabytes at a time, so there is no buffer here.
    pub(super) fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        crate::output::write_in_slices(&mut self.file, bytes)
    }

    /// Writes `header` (from [`npy_header`]) over the room kept for it, and closes the file.
    pub(super) fn finish(mut self, header: &[u8]) -> io::Result<()> {
        assert_eq!(header.len(), HEADER_LEN, "headers fill their room");
        self.file.seek(SeekFrom::Start(0))?;
        self.file.write_all(header)?;
        close(self.file)
    }
}

/// Closes `file` and reports what the close reports: some file systems (NFS) only tell of a full disk
/// or quota there, and dropping a `File` ignores it.
pub(crate) fn close(file: File) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::io::IntoRawFd;
        // SAFETY: `into_raw_fd` hands over the descriptor, so it is closed exactly once, here.
        if unsafe { libc::close(file.into_raw_fd()) } == -1 {
            let e = io::Error::last_os_error();
            // After EINTR Linux has closed the descriptor anyway, and nothing was lost.
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        drop(file);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_has_a_fixed_length_in_numpy_layout() {
        let h = npy_header("<u2", 12345);
        assert_eq!(h.len(), HEADER_LEN);
        assert!(h.starts_with(
            b"\x93NUMPY\x01\x00\x76\x00{'descr': '<u2', 'fortran_order': False, 'shape': (12345,), }"
        ));
        assert!(h.ends_with(b" \n"));
        assert_eq!(npy_header("<u4", u64::MAX).len(), HEADER_LEN);
    }

    #[test]
    fn file_holds_the_header_then_the_data() {
        let dir = std::env::temp_dir().join(format!("bytepair-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for total in [0, 1, 999, 1000, 100_000] {
            let data: Vec<u8> = (0..total).map(|i| (i * 31 % 251) as u8).collect();
            let path = dir.join(format!("{total}.npy"));
            let mut w = NpyWriter::new(File::create(&path).unwrap()).unwrap();
            for piece in data.chunks(1000) {
                w.write(piece).unwrap();
            }
            w.finish(&npy_header("<u1", total as u64)).unwrap();
            let bytes = std::fs::read(&path).unwrap();
            assert_eq!(&bytes[..HEADER_LEN], &npy_header("<u1", total as u64)[..]);
            assert_eq!(&bytes[HEADER_LEN..], &data[..], "{total} bytes");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
