//! Files in the models folder: written atomically (a synced temporary file renamed or
//! hard-linked into place, nothing left behind on failure), read within a size limit, hashed.
//! Not realtime-safe: file I/O.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

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

/// Writes every `(path, bytes)` of `files` into `dir` (created if needed), in order, or none of
/// them: every target is checked before any is written. A file already there with the same
/// bytes is left as it is and returned; one that differs is refused with `differs(path)` unless
/// `force`, which replaces it atomically. New files never replace one created meanwhile. Not
/// realtime-safe: file I/O.
pub fn write_all_or_none(
    files: &[(PathBuf, Vec<u8>)],
    dir: &Path,
    force: bool,
    differs: impl Fn(&Path) -> String,
) -> Result<Vec<PathBuf>, FetchError> {
    let mut unchanged = Vec::new();
    for (path, bytes) in files {
        match std::fs::read(path) {
            Ok(existing) if existing == *bytes => unchanged.push(path.clone()),
            Ok(_) if !force => return Err(FetchError::Io(differs(path))),
            _ => {}
        }
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| FetchError::Io(format!("cannot create {}: {e}", dir.display())))?;
    for (path, bytes) in files {
        if unchanged.contains(path) {
            continue;
        }
        if force {
            write_atomically(path, bytes)?;
        } else {
            write_new_file(path, bytes)?;
        }
    }
    Ok(unchanged)
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
/// then removed. Where the file system has no hard links (FAT, exFAT, some network shares) the
/// temporary file is copied to a `path` created new instead (which never replaces a file
/// either). Nothing is left behind on failure.
pub fn write_new_file(path: &Path, bytes: &[u8]) -> Result<(), FetchError> {
    if path.exists() {
        return Err(FetchError::Io(format!(
            "{} already exists; nothing was overwritten",
            path.display()
        )));
    }
    write_via_temporary(path, bytes, |temporary| {
        link_or_copy(temporary, path, |from, to| std::fs::hard_link(from, to))?;
        std::fs::remove_file(temporary)
    })
}

/// `link(from, to)`, or where linking is not supported, a copy of `from` into a `to` created
/// new and synced. An existing `to` is an error either way.
fn link_or_copy(
    from: &Path,
    to: &Path,
    link: impl FnOnce(&Path, &Path) -> std::io::Result<()>,
) -> std::io::Result<()> {
    match link(from, to) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(e),
        Err(_) => {
            let mut source = std::fs::File::open(from)?;
            let mut copy = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(to)?;
            let copied = std::io::copy(&mut source, &mut copy).and_then(|_| copy.sync_all());
            if copied.is_err() {
                let _ = std::fs::remove_file(to);
            }
            copied
        }
    }
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
    // Unique per process and per call: two plugin instances in one DAW (one process) writing
    // the same model never share a temporary file.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let serial = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temporary = path.with_file_name(format!(
        ".{file_name}.{}.{serial}.partial",
        std::process::id()
    ));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        stemflow_kit::testing::scratch_dir(&format!("files-{name}"))
    }

    #[test]
    fn without_hard_links_a_new_file_is_copied_and_never_replaces_one() {
        let dir = scratch("no-links");
        let from = dir.join("from");
        std::fs::write(&from, b"model").unwrap();
        let unsupported =
            |_: &Path, _: &Path| Err(std::io::Error::from(std::io::ErrorKind::Unsupported));
        let to = dir.join("to");
        link_or_copy(&from, &to, unsupported).unwrap();
        assert_eq!(std::fs::read(&to).unwrap(), b"model");
        // An existing file stays as it is, by the link or by the copy.
        std::fs::write(&from, b"other").unwrap();
        let error = link_or_copy(&from, &to, unsupported).unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::AlreadyExists);
        let exists =
            |_: &Path, _: &Path| Err(std::io::Error::from(std::io::ErrorKind::AlreadyExists));
        assert!(link_or_copy(&from, &to, exists).is_err());
        assert_eq!(std::fs::read(&to).unwrap(), b"model");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn temporary_files_are_unique_per_call() {
        let dir = scratch("unique");
        let path = dir.join("m.onnx");
        // Two writers of one name in one process: each its own temporary file, one wins, the
        // other is refused, nothing is left behind.
        let (a, b) = std::thread::scope(|scope| {
            let a = scope.spawn(|| write_new_file(&path, &[1; 100_000]));
            let b = scope.spawn(|| write_new_file(&path, &[1; 100_000]));
            (a.join().unwrap(), b.join().unwrap())
        });
        assert!(a.is_ok() || b.is_ok());
        assert_eq!(std::fs::read(&path).unwrap(), vec![1; 100_000]);
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["m.onnx"], "no temporary file left");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
