//! Pipes (`<(cat song.wav)`, a FIFO, standard input): their first bytes, and a temporary copy
//! of the containers that need seeking.

use std::fs::File;

use super::reason::io_reason;

/// What is read of a pipe before deciding how to decode it: enough for every container's
/// signature.
pub(super) const PIPE_HEAD_BYTES: usize = 64 << 10;

/// The longest M4A/MP4 or AIFF input taken from a pipe: these are copied to a temporary file
/// first (they need seeking), and a pipe may never end.
const MAX_SPOOLED_BYTES: u64 = 4 << 30;

/// A piped input copied to a temporary file (removed when dropped), for the containers that
/// need seeking: M4A/MP4 (its index may come last) and AIFF (its length is read from its chunk
/// list). Other pipes are decoded as they arrive.
pub(super) struct SpooledPipe {
    /// The temporary file.
    pub path: std::path::PathBuf,
}

impl SpooledPipe {
    /// Copies `head` and what follows of `pipe` to a new temporary file, up to
    /// [`MAX_SPOOLED_BYTES`] and never leaving the temporary folder's disk with less than the
    /// reserve free ([`crate::disk_space`]).
    pub fn read(head: &[u8], mut pipe: File, container: &str) -> Result<Self, String> {
        use std::io::{Read, Write};
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let folder = std::env::temp_dir();
        let path = folder.join(format!(
            "stemflow-pipe-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        // From here on the copy is removed whatever happens.
        let spooled = Self { path };
        let cannot_copy = |e: std::io::Error| {
            format!(
                "cannot copy the pipe to {}: {}",
                spooled.path.display(),
                io_reason(&e)
            )
        };
        let mut copy = File::create(&spooled.path).map_err(cannot_copy)?;
        let mut disk = crate::disk_space::DiskGuard::new(&folder).map_err(|e| {
            format!("cannot copy the pipe ({container} is read from a temporary copy): {e}")
        })?;
        copy.write_all(head).map_err(cannot_copy)?;
        let mut copied = head.len() as u64;
        let mut chunk = vec![0u8; 1 << 20];
        loop {
            let read = match pipe.read(&mut chunk) {
                Ok(0) => break,
                Ok(read) => read,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("reading the pipe failed: {}", io_reason(&e))),
            };
            copied += read as u64;
            if copied > MAX_SPOOLED_BYTES {
                return Err(format!(
                    "{container} from a pipe is copied to a temporary file first (it needs seeking), and this one passed {} GB, so it was stopped; save it to a file and separate the file",
                    MAX_SPOOLED_BYTES >> 30
                ));
            }
            disk.wrote(read as u64).map_err(|e| {
                format!("stopped copying the pipe ({container} is read from a temporary copy): {e}")
            })?;
            copy.write_all(&chunk[..read]).map_err(cannot_copy)?;
        }
        Ok(spooled)
    }
}

/// Reads up to `limit` bytes from the start of `pipe` (less when it ends first).
pub(super) fn read_head(pipe: &mut File, limit: usize) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let mut head = Vec::with_capacity(limit);
    pipe.take(limit as u64)
        .read_to_end(&mut head)
        .map_err(|e| format!("reading the pipe failed: {}", io_reason(&e)))?;
    Ok(head)
}

impl Drop for SpooledPipe {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
