//! Files in the models folder: written atomically (a synced temporary file renamed or
//! hard-linked into place, nothing left behind on failure), read within a size limit, hashed.
//! Not realtime-safe: file I/O.

use std::io::{Read, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::error::FetchError;

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// Lower-case hex SHA-256 of the file at `path`, read in 1 MiB chunks.
pub fn file_sha256(path: &Path) -> Result<String, FetchError> {
    let mut file = std::fs::File::open(path).map_err(|e| read_error(path, &e))?;
    let mut hasher = Sha256::new();
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut chunk).map_err(|e| read_error(path, &e))?;
        if n == 0 {
            break;
        }
        hasher.update(&chunk[..n]);
    }
    Ok(format!("{:x}", hasher.finalize()))
}

/// The file at `path`, read whole when it holds at most `limit_bytes` (no model, checkpoint or
/// wheel Stemflow installs is larger: a bigger file is refused before it is read).
pub fn read_limited(path: &Path, limit_bytes: u64) -> Result<Vec<u8>, FetchError> {
    let size = std::fs::metadata(path)
        .map_err(|e| read_error(path, &e))?
        .len();
    if size > limit_bytes {
        return Err(FetchError::Io(format!(
            "{} is {size} bytes, more than any file Stemflow installs ({limit_bytes} at most)",
            path.display()
        )));
    }
    std::fs::read(path).map_err(|e| read_error(path, &e))
}

/// A failed read of `path`.
pub(crate) fn read_error(path: &Path, error: &std::io::Error) -> FetchError {
    FetchError::Io(format!("cannot read {}: {error}", path.display()))
}

/// A failed write to `path`, saying so plainly when the disk is full.
pub(crate) fn write_error(path: &Path, error: &std::io::Error) -> FetchError {
    if error.kind() == std::io::ErrorKind::StorageFull {
        FetchError::Io(format!(
            "cannot write {}: the disk is full ({error}); free some space and try again",
            path.display()
        ))
    } else {
        FetchError::Io(format!("cannot write {}: {error}", path.display()))
    }
}

/// Writes `bytes` to a temporary file next to `path`, syncs it and renames it over `path`; the
/// temporary file is removed on failure.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), FetchError> {
    write_via_temporary(path, bytes, |temporary| std::fs::rename(temporary, path))
}

/// Writes `bytes` to `path`, which must not exist: a temporary file next to it is written,
/// synced and hard-linked to `path` (a link never replaces a file, even one created meanwhile),
/// then removed. Nothing is left behind on failure.
pub fn write_new_file(path: &Path, bytes: &[u8]) -> Result<(), FetchError> {
    if path.exists() {
        return Err(FetchError::Io(format!(
            "{} already exists; nothing was overwritten",
            path.display()
        )));
    }
    write_via_temporary(path, bytes, |temporary| {
        std::fs::hard_link(temporary, path)?;
        std::fs::remove_file(temporary)
    })
}

/// Writes `bytes` to a temporary file next to `path`, syncs it and hands it to `finish`; the
/// temporary file is removed if anything fails.
fn write_via_temporary(
    path: &Path,
    bytes: &[u8],
    finish: impl FnOnce(&Path) -> std::io::Result<()>,
) -> Result<(), FetchError> {
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = path.with_file_name(format!(".{file_name}.{}.partial", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        finish(&temporary)
    })();
    match result {
        Ok(()) => {
            sync_folder(path);
            Ok(())
        }
        Err(e) => {
            let _ = std::fs::remove_file(&temporary);
            Err(write_error(path, &e))
        }
    }
}

/// Syncs the folder holding `path`, so a rename into it survives a power cut (Unix; elsewhere
/// the file system orders it). Best effort: a folder that cannot be opened is left as it is.
pub(crate) fn sync_folder(path: &Path) {
    #[cfg(unix)]
    if let Some(folder) = path.parent() {
        if let Ok(folder) = std::fs::File::open(folder) {
            let _ = folder.sync_all();
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}
