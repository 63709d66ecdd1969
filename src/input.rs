//! Opening an input file without waiting forever.
//!
//! Opening a FIFO for reading waits until a writer opens the other end, and the engine opens its inputs
//! on worker threads, where Ctrl-C interrupts nothing: `train_bpe` on a FIFO that never gets a writer
//! would ignore Ctrl-C forever. A FIFO is therefore opened without waiting, and the wait for its
//! writer's first bytes (or its close) is a poll, in steps, that ends when the work is cancelled.
//!
//! Invariant: [`open_input`] returns a file whose reads block as usual, or an error, within one step
//! of a cancellation.

use std::fs::File;
use std::path::Path;

use crate::error::{Error, Result};
use crate::progress::Progress;

/// How long one step of the wait for a FIFO's writer lasts: how soon a cancellation is seen.
#[cfg(unix)]
const WAIT_STEP_MS: i32 = 20;

/// Opens `path` for reading; a FIFO is returned once its writer has written or closed, or fails with
/// [`Error::Interrupted`] once `progress` is cancelled while it waits.
pub fn open_input(path: &Path, progress: &dyn Progress) -> Result<File> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
        let is_fifo = std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo());
        if is_fifo {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(path)
                .map_err(|e| Error::io(path, e))?;
            wait_for_writer(&file, path, progress)?;
            return Ok(file);
        }
    }
    #[cfg(not(unix))]
    let _ = progress;
    File::open(path).map_err(|e| Error::io(path, e))
}

/// Waits until the FIFO `file` (opened non-blocking) can be read without blocking, then makes its reads
/// block again. Fails with [`Error::Interrupted`] when `progress` is cancelled first.
#[cfg(unix)]
fn wait_for_writer(file: &File, path: &Path, progress: &dyn Progress) -> Result<()> {
    use std::io::{Error as IoError, ErrorKind};
    use std::os::fd::AsRawFd;

    let fd = file.as_raw_fd();
    loop {
        let mut poll = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the one descriptor `file` owns. A FIFO no writer has opened
        // yet is neither readable nor hung up, so this waits for a writer's bytes or its close.
        let ready = unsafe { libc::poll(&mut poll, 1, WAIT_STEP_MS) };
        if ready > 0 {
            break;
        }
        if ready < 0 {
            let e = IoError::last_os_error();
            if e.kind() != ErrorKind::Interrupted {
                return Err(Error::io(path, e));
            }
        }
        if progress.cancelled() {
            return Err(Error::Interrupted);
        }
    }
    // SAFETY: F_GETFL and F_SETFL on a descriptor `file` owns change only its status flags.
    let ok = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) >= 0
    };
    if ok {
        Ok(())
    } else {
        Err(Error::io(path, IoError::last_os_error()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::Phase;
    use std::sync::atomic::{AtomicBool, Ordering};

    struct Cancel(AtomicBool);

    impl Progress for Cancel {
        fn report(&self, _: Phase, _: u64, _: u64) -> Result<()> {
            Ok(())
        }

        fn cancelled(&self) -> bool {
            self.0.load(Ordering::Relaxed)
        }
    }

    #[test]
    fn a_fifo_without_a_writer_waits_until_cancelled() {
        let path = std::env::temp_dir().join(format!("bytepair-fifo-{}", std::process::id()));
        let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let cancel = Cancel(AtomicBool::new(false));
        std::thread::scope(|scope| {
            scope.spawn(|| {
                std::thread::sleep(std::time::Duration::from_millis(100));
                cancel.0.store(true, Ordering::Relaxed);
            });
            assert!(matches!(
                open_input(&path, &cancel),
                Err(Error::Interrupted)
            ));
        });
        // With a writer that writes and closes, the reader gets its bytes and then the end.
        let cancel = Cancel(AtomicBool::new(false));
        std::thread::scope(|scope| {
            scope.spawn(|| std::fs::write(&path, b"hello").unwrap());
            let mut text = String::new();
            let mut file = open_input(&path, &cancel).unwrap();
            std::io::Read::read_to_string(&mut file, &mut text).unwrap();
            assert_eq!(text, "hello");
        });
        std::fs::remove_file(path).unwrap();
    }
}
