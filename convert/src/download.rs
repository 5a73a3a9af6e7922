//! [`Downloader`]: fetches a model file from its owner's URL into `<file>.part` next to where it
//! will live, resuming where an earlier or interrupted attempt stopped (an HTTP range request),
//! then checks it against the catalogue's [`FileCheck`] before anything is installed. A part
//! that fails its check is deleted, never resumed. Not realtime-safe: network and file I/O.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use md5::Md5;
use sha2::{Digest, Sha256};

use crate::catalogue::{FileCheck, RemoteFile};
use crate::error::ConvertError;
use crate::http::http_agent;

/// Bytes UVR hashes at the end of a model file to key its parameter table.
const UVR_TAIL_BYTES: u64 = 10_240_000;
/// Attempts per file: a connection that drops mid-file is resumed this many times.
const MAX_ATTEMPTS: u32 = 4;
/// No model file Stemflow downloads is larger.
pub const MAX_MODEL_DOWNLOAD_BYTES: u64 = 2 << 30;

/// Downloads over HTTP(S) with the system's certificates.
pub struct Downloader {
    agent: ureq::Agent,
    retry_pause: Duration,
}

impl Default for Downloader {
    fn default() -> Self {
        Self::new()
    }
}

impl Downloader {
    /// A downloader that honours the proxy environment (`HTTPS_PROXY`, `NO_PROXY`, …).
    pub fn new() -> Self {
        Self::with_proxy(ureq::Proxy::try_from_env(), Duration::from_secs(2))
    }

    /// A downloader that connects directly and retries at once (for loopback servers).
    pub fn direct() -> Self {
        Self::with_proxy(None, Duration::ZERO)
    }

    fn with_proxy(proxy: Option<ureq::Proxy>, retry_pause: Duration) -> Self {
        // Statuses are read here: 206, 200 and 416 each mean something to a resume.
        let agent = http_agent(proxy, false);
        Self { agent, retry_pause }
    }

    /// Downloads the file at `url` into `part` (resuming what `part` already holds), then
    /// checks it against `check`. `progress(bytes_so_far, total)` is called as data arrives.
    /// Returns the file's size.
    pub fn fetch(
        &self,
        url: &str,
        check: &FileCheck,
        part: &Path,
        progress: &mut dyn FnMut(u64, Option<u64>),
    ) -> Result<u64, ConvertError> {
        let file = Source { url, check };
        let mut last_error = None;
        for attempt in 0..MAX_ATTEMPTS {
            if attempt > 0 {
                std::thread::sleep(self.retry_pause * attempt);
            }
            match self.try_fetch(&file, part, progress) {
                Ok(size) => {
                    if let Err(error) = verify(part, file.check) {
                        let _ = std::fs::remove_file(part);
                        return Err(error);
                    }
                    return Ok(size);
                }
                Err(Attempt::Retry(message)) => last_error = Some(message),
                Err(Attempt::Fail(error)) => return Err(error),
            }
        }
        let have = std::fs::metadata(part).map(|m| m.len()).unwrap_or(0);
        let again = if have > 0 {
            format!(
                "run the command again to resume from byte {have} ({})",
                part.display()
            )
        } else {
            "run the command again when the source can be reached".to_owned()
        };
        Err(ConvertError::Download(format!(
            "{}: {} (gave up after {MAX_ATTEMPTS} attempts; {again})",
            file.url,
            last_error.unwrap_or_default(),
        )))
    }

    fn try_fetch(
        &self,
        file: &Source<'_>,
        part: &Path,
        progress: &mut dyn FnMut(u64, Option<u64>),
    ) -> Result<u64, Attempt> {
        let io =
            |e: std::io::Error| Attempt::Fail(ConvertError::Io(format!("{}: {e}", part.display())));
        let have = std::fs::metadata(part).map(|m| m.len()).unwrap_or(0);
        let mut request = self.agent.get(file.url);
        if have > 0 {
            request = request.header("Range", &format!("bytes={have}-"));
        }
        let mut response = request
            .call()
            .map_err(|e| Attempt::Retry(format!("{e} (is this machine online?)")))?;
        let status = response.status().as_u16();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let length = header("content-length").and_then(|v| v.parse::<u64>().ok());
        let (start, total) = match status {
            206 => {
                let (start, total) = header("content-range")
                    .as_deref()
                    .and_then(content_range)
                    .ok_or_else(|| Attempt::Retry("a partial answer without its range".into()))?;
                if start != have {
                    // Not where the part ends: start over.
                    File::create(part).map_err(io)?;
                    return Err(Attempt::Retry(format!(
                        "the server resumed at byte {start}, not {have}"
                    )));
                }
                (start, total.or(length.map(|l| start + l)))
            }
            // The whole file (the server ignores ranges, or nothing was there yet).
            200 => (0, length),
            416 if have > 0 => {
                // Nothing past the part's end: it is whole if its size is the file's.
                let total = header("content-range")
                    .and_then(|r| r.rsplit('/').next()?.parse::<u64>().ok())
                    .or(file.check.size_bytes);
                if total == Some(have) {
                    progress(have, total);
                    return Ok(have);
                }
                File::create(part).map_err(io)?;
                return Err(Attempt::Retry(
                    "the partial download was longer than the file".into(),
                ));
            }
            404 | 410 => {
                return Err(Attempt::Fail(ConvertError::Download(format!(
                    "{}: HTTP {status}: the owner no longer publishes this file here",
                    file.url
                ))))
            }
            _ => return Err(Attempt::Retry(format!("HTTP {status}"))),
        };
        if let Some(total) = total {
            if total > MAX_MODEL_DOWNLOAD_BYTES {
                return Err(Attempt::Fail(ConvertError::Download(format!(
                    "{} is {total} bytes, more than any model Stemflow downloads",
                    file.url
                ))));
            }
            if file.check.size_bytes.is_some_and(|size| size != total) {
                return Err(Attempt::Fail(ConvertError::Download(format!(
                    "{} is {total} bytes, the catalogue says {}: not the file Stemflow knows",
                    file.url,
                    file.check.size_bytes.unwrap_or(0)
                ))));
            }
        }
        let mut out = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(start == 0)
            .open(part)
            .map_err(io)?;
        out.seek(SeekFrom::Start(start)).map_err(io)?;
        let mut reader = response
            .body_mut()
            .with_config()
            .limit(MAX_MODEL_DOWNLOAD_BYTES)
            .reader();
        let mut done = start;
        let mut chunk = vec![0u8; 1 << 16];
        loop {
            let n = match reader.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) => {
                    out.flush().map_err(io)?;
                    return Err(Attempt::Retry(format!(
                        "the connection dropped at byte {done}: {e}"
                    )));
                }
            };
            out.write_all(&chunk[..n]).map_err(io)?;
            done += n as u64;
            progress(done, total);
        }
        out.sync_all().map_err(io)?;
        if total.is_some_and(|t| t != done) {
            return Err(Attempt::Retry(format!(
                "the download stopped at {done} of {} bytes",
                total.unwrap_or(0)
            )));
        }
        Ok(done)
    }
}

/// Where a file comes from and how it is checked.
struct Source<'a> {
    url: &'a str,
    check: &'a FileCheck,
}

/// What one attempt ended in.
enum Attempt {
    /// Worth another attempt (resuming).
    Retry(String),
    /// Not worth one.
    Fail(ConvertError),
}

/// `Content-Range: bytes START-END/TOTAL` (TOTAL may be `*`).
fn content_range(value: &str) -> Option<(u64, Option<u64>)> {
    let range = value.trim().strip_prefix("bytes ")?;
    let (span, total) = range.split_once('/')?;
    let start = span.split_once('-')?.0.trim().parse().ok()?;
    Some((start, total.trim().parse().ok()))
}

/// Checks a downloaded file: its size, SHA-256 (or the owner's prefix of it) and UVR key.
pub fn verify(path: &Path, check: &FileCheck) -> Result<(), ConvertError> {
    let what = path
        .file_name()
        .map(|n| n.to_string_lossy().trim_end_matches(".part").to_owned())
        .unwrap_or_default();
    let io = |e: std::io::Error| ConvertError::Io(format!("{}: {e}", path.display()));
    let mut file = File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    if let Some(expected) = check.size_bytes.filter(|&s| s != size) {
        return Err(ConvertError::Checksum {
            what,
            expected: format!("{expected} bytes"),
            found: format!("{size} bytes"),
        });
    }
    let mut sha256 = Sha256::new();
    let mut md5 = Md5::new();
    let tail_start = size.saturating_sub(UVR_TAIL_BYTES);
    let mut offset = 0u64;
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut chunk).map_err(io)?;
        if n == 0 {
            break;
        }
        sha256.update(&chunk[..n]);
        let end = offset + n as u64;
        if end > tail_start {
            let from = tail_start.saturating_sub(offset) as usize;
            md5.update(&chunk[from..n]);
        }
        offset = end;
    }
    let sha256 = format!("{:x}", sha256.finalize());
    let md5 = format!("{:x}", md5.finalize());
    let mismatch = |expected: &str, found: String| ConvertError::Checksum {
        what: what.clone(),
        expected: expected.to_owned(),
        found,
    };
    if let Some(expected) = check.sha256.filter(|e| *e != sha256) {
        return Err(mismatch(expected, sha256));
    }
    if let Some(prefix) = check.sha256_prefix.filter(|p| !sha256.starts_with(p)) {
        return Err(mismatch(&format!("{prefix}…"), sha256));
    }
    if let Some(expected) = check.uvr_md5_tail.filter(|e| *e != md5) {
        return Err(ConvertError::Checksum {
            what: format!("{what} (UVR's key: MD5 of its last 10,240,000 bytes)"),
            expected: expected.to_owned(),
            found: md5,
        });
    }
    Ok(())
}

/// Environment variable naming a mirror of the catalogue's files: `URL/<file name>` is fetched
/// instead of the owner's URL (for machines that reach only a local mirror); the checks stay.
pub const MODELS_MIRROR_ENV: &str = "STEMFLOW_MODELS_MIRROR";

/// Where `file` is fetched from: the owner's URL, or the mirror `STEMFLOW_MODELS_MIRROR` names.
pub fn source_url(file: &RemoteFile) -> String {
    match std::env::var(MODELS_MIRROR_ENV) {
        Ok(mirror) if !mirror.trim().is_empty() => {
            format!(
                "{}/{}",
                mirror.trim().trim_end_matches('/'),
                file.file_name()
            )
        }
        _ => file.url.to_owned(),
    }
}

/// The `.part` file a download into `dest` goes to.
pub fn part_path(dest: &Path) -> PathBuf {
    let mut name = dest.file_name().unwrap_or_default().to_os_string();
    name.push(".part");
    dest.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_ranges_are_read() {
        assert_eq!(content_range("bytes 100-199/200"), Some((100, Some(200))));
        assert_eq!(content_range("bytes 5-9/*"), Some((5, None)));
        assert_eq!(content_range("items 1-2/3"), None);
        assert_eq!(content_range("bytes x-2/3"), None);
    }

    #[test]
    fn a_file_is_checked_by_size_hash_prefix_and_uvr_key() {
        let dir = std::env::temp_dir().join(format!("stemflow-verify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.onnx.part");
        // Longer than UVR's tail, so the key covers only the end.
        let bytes: Vec<u8> = (0..UVR_TAIL_BYTES + 1000)
            .map(|i| (i % 251) as u8)
            .collect();
        std::fs::write(&path, &bytes).unwrap();
        let sha256 = format!("{:x}", Sha256::digest(&bytes));
        let md5 = format!("{:x}", Md5::digest(&bytes[1000..]));
        let sha: &'static str = Box::leak(sha256.clone().into_boxed_str());
        let key: &'static str = Box::leak(md5.into_boxed_str());
        let prefix: &'static str = Box::leak(sha256[..8].to_owned().into_boxed_str());
        let good = FileCheck {
            sha256: Some(sha),
            sha256_prefix: Some(prefix),
            uvr_md5_tail: Some(key),
            size_bytes: Some(bytes.len() as u64),
        };
        assert_eq!(verify(&path, &good), Ok(()));
        let wrong_key = FileCheck {
            uvr_md5_tail: Some("00000000000000000000000000000000"),
            ..good
        };
        assert!(
            matches!(verify(&path, &wrong_key), Err(ConvertError::Checksum { what, .. }) if what.contains("UVR"))
        );
        let wrong_prefix = FileCheck {
            sha256: None,
            sha256_prefix: Some("00000000"),
            ..good
        };
        assert!(matches!(
            verify(&path, &wrong_prefix),
            Err(ConvertError::Checksum { what, .. }) if what == "m.onnx"
        ));
        let wrong_size = FileCheck {
            size_bytes: Some(3),
            ..good
        };
        assert!(verify(&path, &wrong_size).is_err());
        assert_eq!(
            part_path(Path::new("/m/x.onnx")),
            Path::new("/m/x.onnx.part")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
