//! [`Downloader`]: fetches a model file from its owner's URL (or a mirror) into `<file>.part`,
//! resuming where an earlier or interrupted attempt stopped (an HTTP range request), then
//! checks it against the catalogue's [`FileCheck`] before anything is installed. A part that
//! fails its check is deleted, never resumed.
//!
//! A resume asks for the rest only if the file is still the one the part began with
//! (`If-Range` with the first answer's strong `ETag` or `Last-Modified`, kept beside the part as
//! `<file>.part.validator`): a file changed upstream comes back whole and restarts the part,
//! never spliced onto it. [`MAX_MODEL_DOWNLOAD_BYTES`] bounds what one file may bring over all
//! its attempts together, not per answer.
//!
//! Transient failures (no answer, a dropped connection, a stall, HTTP 408, 429 and 5xx) are
//! retried with a growing pause; an attempt that brought new bytes resets the count, so a line
//! that drops every few minutes still finishes a large checkpoint. Permanent ones (404, 403, a
//! file that is not the catalogue's, a full disk) fail at once. Not realtime-safe: network and
//! file I/O.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use md5::Md5;
use sha2::{Digest, Sha256};
use ureq::tls::{RootCerts, TlsConfig};

use crate::error::FetchError;
use crate::files::write_error;
use crate::remote_file::{FileCheck, RemoteFile};

/// Bytes UVR hashes at the end of a model file to key its parameter table.
const UVR_TAIL_BYTES: u64 = 10_240_000;
/// Attempts in a row that bring no new byte before a download gives up.
const MAX_STALLED_ATTEMPTS: u32 = 4;
/// Attempts before giving up on a source no attempt reached (no network: say so soon).
const MAX_UNREACHED_ATTEMPTS: u32 = 3;
/// Attempts per file in all, however much each brought.
const MAX_ATTEMPTS: u32 = 20;
/// The longest pause between two attempts.
const MAX_RETRY_PAUSE: Duration = Duration::from_secs(30);
/// How often a pause between attempts looks at the cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(50);
/// No model file Stemflow downloads is larger.
pub const MAX_MODEL_DOWNLOAD_BYTES: u64 = 2 << 30;

/// Downloads over HTTP(S) with the system's certificates.
pub struct Downloader {
    agent: ureq::Agent,
    /// The pause after the first failed attempt; it doubles with each attempt that brings
    /// nothing, up to [`MAX_RETRY_PAUSE`].
    retry_pause: Duration,
    /// A mirror of the catalogue's files (`MIRROR/<file name>`), when set.
    mirror: Option<String>,
    /// Most bytes one file may bring over all its attempts ([`MAX_MODEL_DOWNLOAD_BYTES`]).
    max_file_bytes: u64,
}

impl Default for Downloader {
    fn default() -> Self {
        Self::new()
    }
}

impl Downloader {
    /// A downloader that honours the proxy environment (`HTTPS_PROXY`, `NO_PROXY`, …) and
    /// [`MODELS_MIRROR_ENV`].
    pub fn new() -> Self {
        let mirror = std::env::var(MODELS_MIRROR_ENV)
            .ok()
            .filter(|m| !m.trim().is_empty());
        Self {
            mirror,
            ..Self::with_proxy(ureq::Proxy::try_from_env(), Duration::from_secs(2))
        }
    }

    /// A downloader that connects directly, without a mirror, and retries at once (for
    /// loopback servers).
    pub fn direct() -> Self {
        Self::with_proxy(None, Duration::ZERO)
    }

    /// The same downloader, fetching the catalogue's files from `mirror` instead.
    pub fn with_mirror(self, mirror: &str) -> Self {
        Self {
            mirror: Some(mirror.to_owned()),
            ..self
        }
    }

    /// The same downloader, letting one file bring at most `max_file_bytes` over all its
    /// attempts (tests; [`MAX_MODEL_DOWNLOAD_BYTES`] otherwise).
    pub fn with_max_file_bytes(self, max_file_bytes: u64) -> Self {
        Self {
            max_file_bytes,
            ..self
        }
    }

    fn with_proxy(proxy: Option<ureq::Proxy>, retry_pause: Duration) -> Self {
        let agent = http_agent(proxy);
        Self {
            agent,
            retry_pause,
            mirror: None,
            max_file_bytes: MAX_MODEL_DOWNLOAD_BYTES,
        }
    }

    /// Where `file` is fetched from: the owner's URL, or the mirror's copy.
    pub fn url_for(&self, file: &RemoteFile) -> String {
        match &self.mirror {
            Some(mirror) => format!(
                "{}/{}",
                mirror.trim().trim_end_matches('/'),
                file.file_name()
            ),
            None => file.url.to_owned(),
        }
    }

    /// Downloads the file at `url` into `part` (resuming what `part` already holds), then
    /// checks it against `check`. `progress(bytes_so_far, total)` is called as data arrives.
    /// Returns the file's size.
    ///
    /// Setting `cancel` stops the download within one read (at most the stall timeout when the
    /// connection is silent) with [`FetchError::Cancelled`]; the part is kept for the next
    /// attempt. When no attempt got an answer, the error is [`FetchError::Unreachable`].
    pub fn fetch(
        &self,
        url: &str,
        check: &FileCheck,
        part: &Path,
        progress: &mut dyn FnMut(u64, Option<u64>),
        cancel: &AtomicBool,
    ) -> Result<u64, FetchError> {
        let file = Source { url, check };
        let part_len = || std::fs::metadata(part).map(|m| m.len()).unwrap_or(0);
        let mut last_error: String;
        let mut was_reached = false;
        let mut stalled = 0u32;
        let mut attempts = 0u32;
        // Bytes this file brought over all attempts, bounded by `max_file_bytes`.
        let mut received = 0u64;
        loop {
            if cancel.load(Ordering::Relaxed) {
                return Err(FetchError::Cancelled);
            }
            let before = part_len();
            match self.try_fetch(&file, part, progress, cancel, &mut received) {
                Ok(size) => {
                    let _ = std::fs::remove_file(validator_path(part));
                    if let Err(error) = verify(part, file.check) {
                        let _ = std::fs::remove_file(part);
                        return Err(error);
                    }
                    return Ok(size);
                }
                Err(Attempt::Retry(message)) => {
                    was_reached = true;
                    last_error = message;
                }
                Err(Attempt::Unreachable(message)) => last_error = message,
                Err(Attempt::Fail(error)) => return Err(error),
            }
            attempts += 1;
            if part_len() > before {
                stalled = 0;
            } else {
                stalled += 1;
            }
            let is_unreached = !was_reached && attempts >= MAX_UNREACHED_ATTEMPTS;
            if stalled >= MAX_STALLED_ATTEMPTS || attempts >= MAX_ATTEMPTS || is_unreached {
                break;
            }
            self.pause(stalled, cancel)?;
        }
        if !was_reached {
            return Err(FetchError::Unreachable(format!(
                "{}: {last_error} (tried {attempts} times)",
                file.url
            )));
        }
        let have = part_len();
        let again = if have > 0 {
            format!(
                "run the command again to resume from byte {have} ({})",
                part.display()
            )
        } else {
            "run the command again when the source can be reached".to_owned()
        };
        Err(FetchError::Download(format!(
            "{}: {last_error} (gave up after {attempts} attempts; {again})",
            file.url,
        )))
    }

    /// The text at `url` (an index page), asked for with `accept`, at most `limit_bytes`: one
    /// attempt, no resume. No answer at all is [`FetchError::Unreachable`]; an HTTP error
    /// status is [`FetchError::Download`].
    pub fn read_page(
        &self,
        url: &str,
        accept: &str,
        limit_bytes: u64,
    ) -> Result<String, FetchError> {
        let unreachable = |e: ureq::Error| {
            FetchError::Unreachable(format!("{url}: {e} (is this machine online?)"))
        };
        let mut response = self
            .agent
            .get(url)
            .header("Accept", accept)
            .call()
            .map_err(unreachable)?;
        let status = response.status().as_u16();
        if !(200..300).contains(&status) {
            return Err(FetchError::Download(format!("{url}: HTTP {status}")));
        }
        response
            .body_mut()
            .with_config()
            .limit(limit_bytes)
            .read_to_string()
            .map_err(|e| FetchError::Download(format!("{url}: {e}")))
    }

    /// Waits before the next attempt: the base pause, doubled for each further attempt in a row
    /// that brought nothing, at most [`MAX_RETRY_PAUSE`]; returns early when `cancel` is set.
    fn pause(&self, stalled: u32, cancel: &AtomicBool) -> Result<(), FetchError> {
        let doublings = stalled.saturating_sub(1).min(5);
        let pause = (self.retry_pause * (1u32 << doublings)).min(MAX_RETRY_PAUSE);
        let deadline = Instant::now() + pause;
        while Instant::now() < deadline {
            if cancel.load(Ordering::Relaxed) {
                return Err(FetchError::Cancelled);
            }
            std::thread::sleep(CANCEL_POLL.min(pause));
        }
        Ok(())
    }

    /// One attempt at `file`: resumes `part` where it ends when the server allows it (and the
    /// file is still the one the part began with) and returns the file's length once the part
    /// holds all of it.
    fn try_fetch(
        &self,
        file: &Source<'_>,
        part: &Path,
        progress: &mut dyn FnMut(u64, Option<u64>),
        cancel: &AtomicBool,
        received: &mut u64,
    ) -> Result<u64, Attempt> {
        let io = |e: std::io::Error| Attempt::Fail(write_error(part, &e));
        let have = std::fs::metadata(part).map(|m| m.len()).unwrap_or(0);
        let validator = std::fs::read_to_string(validator_path(part)).ok();
        let mut request = self.agent.get(file.url);
        if have > 0 {
            request = request.header("Range", &format!("bytes={have}-"));
            // Only if the file is still the one the part began with; else the whole file.
            if let Some(validator) = &validator {
                request = request.header("If-Range", validator.as_str());
            }
        }
        // No answer at all (no name, no route, refused, a proxy or TLS failure, a connection
        // that broke before the headers): whatever the cause, what helps is the same.
        let mut response = request
            .call()
            .map_err(|e| Attempt::Unreachable(format!("{e} (is this machine online?)")))?;
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let answer = Answer {
            status: response.status().as_u16(),
            length: header("content-length").and_then(|v| v.parse::<u64>().ok()),
            content_range: header("content-range"),
            validator: strong_validator(header("etag"), header("last-modified")),
        };
        let (start, total) = match answer.resume_point(file, part, have, validator)? {
            ResumePoint::At { start, total } => (start, total),
            ResumePoint::AlreadyWhole(size) => {
                progress(size, Some(size));
                return Ok(size);
            }
        };
        self.check_total(file, total)?;
        let mut out = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(start == 0)
            .open(part)
            .map_err(io)?;
        out.seek(SeekFrom::Start(start)).map_err(io)?;
        match &answer.validator {
            Some(value) => std::fs::write(validator_path(part), value).map_err(io)?,
            None => {
                let _ = std::fs::remove_file(validator_path(part));
            }
        }
        // What this file may still bring (over all attempts), and its end on disk.
        let body = Body {
            start,
            total,
            allowed: self
                .max_file_bytes
                .saturating_sub(*received)
                .min(self.max_file_bytes.saturating_sub(start)),
        };
        let mut reader = response
            .body_mut()
            .with_config()
            .limit(body.allowed.saturating_add(1))
            .reader();
        let done = self.receive(
            file,
            &body,
            (&mut reader, &mut out, part),
            received,
            progress,
            cancel,
        )?;
        if total.is_some_and(|t| t != done) {
            return Err(Attempt::Retry(format!(
                "the download stopped at {done} of {} bytes",
                total.unwrap_or(0)
            )));
        }
        Ok(done)
    }

    /// Refuses a file larger than any model, or not of the size the catalogue knows.
    fn check_total(&self, file: &Source<'_>, total: Option<u64>) -> Result<(), Attempt> {
        let Some(total) = total else {
            return Ok(());
        };
        if total > self.max_file_bytes {
            return Err(Attempt::Fail(FetchError::Download(format!(
                "{} is {total} bytes, more than any model Stemflow downloads",
                file.url
            ))));
        }
        if file.check.size_bytes.is_some_and(|size| size != total) {
            return Err(Attempt::Fail(FetchError::Download(format!(
                "{} is {total} bytes, the catalogue says {}: not the file Stemflow knows",
                file.url,
                file.check.size_bytes.unwrap_or(0)
            ))));
        }
        Ok(())
    }

    /// Writes the answer's body to `out` (the part, at `body.start`) until it ends, the user
    /// cancels, the connection drops or the file brings more than any model; returns where the
    /// part ends.
    fn receive(
        &self,
        file: &Source<'_>,
        body: &Body,
        (reader, out, part): (&mut dyn Read, &mut File, &Path),
        received: &mut u64,
        progress: &mut dyn FnMut(u64, Option<u64>),
        cancel: &AtomicBool,
    ) -> Result<u64, Attempt> {
        let io = |e: std::io::Error| Attempt::Fail(write_error(part, &e));
        let mut done = body.start;
        let mut chunk = vec![0u8; 1 << 16];
        loop {
            if cancel.load(Ordering::Relaxed) {
                out.sync_all().map_err(io)?;
                return Err(Attempt::Fail(FetchError::Cancelled));
            }
            let n = match reader.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) => {
                    out.sync_all().map_err(io)?;
                    return Err(Attempt::Retry(format!(
                        "the connection dropped at byte {done}: {e}"
                    )));
                }
            };
            *received += n as u64;
            if done + n as u64 - body.start > body.allowed {
                out.sync_all().map_err(io)?;
                return Err(Attempt::Fail(FetchError::Download(format!(
                    "{} sent more than {} bytes over all attempts, more than any model \
                     Stemflow downloads",
                    file.url, self.max_file_bytes
                ))));
            }
            out.write_all(&chunk[..n]).map_err(io)?;
            done += n as u64;
            progress(done, body.total);
        }
        out.sync_all().map_err(io)?;
        Ok(done)
    }
}

/// What a server answered a (ranged) request with, before its body.
struct Answer {
    status: u16,
    length: Option<u64>,
    content_range: Option<String>,
    /// Its strong validator (ETag, or Last-Modified), for the next attempt's `If-Range`.
    validator: Option<String>,
}

/// Where an answer's body goes in the part.
enum ResumePoint {
    /// At byte `start`; the file's length when known.
    At { start: u64, total: Option<u64> },
    /// Nowhere: the part (this many bytes) is the whole file already.
    AlreadyWhole(u64),
}

/// The body an attempt receives: where it starts in the part, the file's length when known, and
/// the bytes it may still bring.
struct Body {
    start: u64,
    total: Option<u64>,
    allowed: u64,
}

impl Answer {
    /// Where the body goes for a part of `have` bytes begun on the version `validator` names; an
    /// error (starting the part over where it cannot be resumed) for any other answer.
    fn resume_point(
        &self,
        file: &Source<'_>,
        part: &Path,
        have: u64,
        validator: Option<String>,
    ) -> Result<ResumePoint, Attempt> {
        let io = |e: std::io::Error| Attempt::Fail(write_error(part, &e));
        let status = self.status;
        if status == 206 && validator.is_some() && self.validator != validator {
            // A range of another version of the file (a server that ignored If-Range).
            File::create(part).map_err(io)?;
            let _ = std::fs::remove_file(validator_path(part));
            return Err(Attempt::Retry(
                "the file changed upstream since the part began: starting over".into(),
            ));
        }
        match status {
            206 => {
                let (start, total) = self
                    .content_range
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
                Ok(ResumePoint::At {
                    start,
                    total: total.or(self.length.map(|l| start + l)),
                })
            }
            // The whole file (the server ignores ranges, or nothing was there yet).
            200 => Ok(ResumePoint::At {
                start: 0,
                total: self.length,
            }),
            416 if have > 0 => {
                // Nothing past the part's end: it is whole if its size is the file's.
                let total = self
                    .content_range
                    .as_deref()
                    .and_then(|r| r.rsplit('/').next()?.parse::<u64>().ok())
                    .or(file.check.size_bytes);
                if total == Some(have) {
                    return Ok(ResumePoint::AlreadyWhole(have));
                }
                File::create(part).map_err(io)?;
                Err(Attempt::Retry(
                    "the partial download was longer than the file".into(),
                ))
            }
            404 | 410 => Err(Attempt::Fail(FetchError::Download(format!(
                "{}: HTTP {status}: the owner no longer publishes this file here",
                file.url
            )))),
            // Busy or failing for now: worth another attempt.
            408 | 429 | 500..=599 => Err(Attempt::Retry(format!("HTTP {status} from the server"))),
            401 | 403 => Err(Attempt::Fail(FetchError::Download(format!(
                "{}: HTTP {status}: access refused (a proxy or firewall may block it; a \
                 mirror can be set with {MODELS_MIRROR_ENV})",
                file.url
            )))),
            _ => Err(Attempt::Fail(FetchError::Download(format!(
                "{}: unexpected HTTP {status}",
                file.url
            )))),
        }
    }
}

/// Where a file comes from and how it is checked.
struct Source<'a> {
    url: &'a str,
    check: &'a FileCheck,
}

/// What one attempt ended in.
enum Attempt {
    /// The server answered, then something transient went wrong: worth another attempt
    /// (resuming).
    Retry(String),
    /// No answer came (DNS, connection refused, no network, a proxy): worth another attempt.
    Unreachable(String),
    /// Not worth one.
    Fail(FetchError),
}

/// `Content-Range: bytes START-END/TOTAL` (TOTAL may be `*`).
fn content_range(value: &str) -> Option<(u64, Option<u64>)> {
    let range = value.trim().strip_prefix("bytes ")?;
    let (span, total) = range.split_once('/')?;
    let start = span.split_once('-')?.0.trim().parse().ok()?;
    Some((start, total.trim().parse().ok()))
}

/// The hashes a [`FileCheck`] compares, computed in one pass.
struct FileHasher {
    sha256: Sha256,
    md5: Md5,
    /// Where UVR's tail starts.
    tail_start: u64,
    offset: u64,
}

impl FileHasher {
    fn new(size: u64) -> Self {
        Self {
            sha256: Sha256::new(),
            md5: Md5::new(),
            tail_start: size.saturating_sub(UVR_TAIL_BYTES),
            offset: 0,
        }
    }

    fn update(&mut self, chunk: &[u8]) {
        self.sha256.update(chunk);
        let end = self.offset + chunk.len() as u64;
        if end > self.tail_start {
            let from = self.tail_start.saturating_sub(self.offset) as usize;
            self.md5.update(&chunk[from..]);
        }
        self.offset = end;
    }

    /// Compares the hashes with `check`'s; `what` names the file in the error.
    fn check(self, what: &str, check: &FileCheck) -> Result<(), FetchError> {
        let sha256 = format!("{:x}", self.sha256.finalize());
        let md5 = format!("{:x}", self.md5.finalize());
        let mismatch = |expected: &str, found: String| FetchError::Checksum {
            what: what.to_owned(),
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
            return Err(FetchError::Checksum {
                what: format!("{what} (UVR's key: MD5 of its last 10,240,000 bytes)"),
                expected: expected.to_owned(),
                found: md5,
            });
        }
        Ok(())
    }
}

/// A size that is not the catalogue's.
fn check_size(what: &str, size: u64, check: &FileCheck) -> Result<(), FetchError> {
    match check.size_bytes.filter(|&s| s != size) {
        Some(expected) => Err(FetchError::Checksum {
            what: what.to_owned(),
            expected: format!("{expected} bytes"),
            found: format!("{size} bytes"),
        }),
        None => Ok(()),
    }
}

/// Checks a downloaded file: its size, SHA-256 (or the owner's prefix of it) and UVR key.
pub fn verify(path: &Path, check: &FileCheck) -> Result<(), FetchError> {
    let what = path
        .file_name()
        .map(|n| n.to_string_lossy().trim_end_matches(".part").to_owned())
        .unwrap_or_default();
    let io = |e: std::io::Error| FetchError::Io(format!("{}: {e}", path.display()));
    let mut file = File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    check_size(&what, size, check)?;
    let mut hasher = FileHasher::new(size);
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut chunk).map_err(io)?;
        if n == 0 {
            break;
        }
        hasher.update(&chunk[..n]);
    }
    hasher.check(&what, check)
}

/// Checks a file's bytes already in memory (`what` names it in the error), as [`verify`] does.
pub fn verify_bytes(what: &str, bytes: &[u8], check: &FileCheck) -> Result<(), FetchError> {
    check_size(what, bytes.len() as u64, check)?;
    let mut hasher = FileHasher::new(bytes.len() as u64);
    hasher.update(bytes);
    hasher.check(what, check)
}

/// Environment variable naming a mirror of the catalogue's files: `URL/<file name>` is fetched
/// instead of the owner's URL (for machines that reach only a local mirror); the checks stay.
/// [`Downloader::new`] reads it.
pub const MODELS_MIRROR_ENV: &str = "STEMFLOW_MODELS_MIRROR";

/// Where the validator of `part`'s first answer is kept (for `If-Range`).
fn validator_path(part: &Path) -> PathBuf {
    let mut name = part.file_name().unwrap_or_default().to_os_string();
    name.push(".validator");
    part.with_file_name(name)
}

/// What `If-Range` may carry: a strong `ETag` (a weak one, `W/"…"`, may not be used), else the
/// `Last-Modified` date.
fn strong_validator(etag: Option<String>, last_modified: Option<String>) -> Option<String> {
    etag.filter(|tag| tag.starts_with('"'))
        .or(last_modified)
        .filter(|value| !value.is_empty() && !value.contains(['\r', '\n']))
}

/// The `.part` file a download into `dest` goes to.
pub fn part_path(dest: &Path) -> PathBuf {
    let mut name = dest.file_name().unwrap_or_default().to_os_string();
    name.push(".part");
    dest.with_file_name(name)
}

/// Longest wait for a connection (DNS and TCP).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);
/// Longest wait for the answer's headers once connected.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest a read may wait for data: a connection silent this long is dropped (and a download
/// resumed by its retry).
const STALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The HTTP client every download uses: through `proxy` (`ureq::Proxy::try_from_env()` for the
/// environment's), the system's certificate store (so proxies the system trusts work), connect,
/// answer and stall timeouts, Stemflow's user agent. HTTP error statuses are not errors: the
/// caller reads the status (a resumed download tells 200, 206 and 416 apart).
fn http_agent(proxy: Option<ureq::Proxy>) -> ureq::Agent {
    ureq::Agent::config_builder()
        .tls_config(
            TlsConfig::builder()
                .root_certs(RootCerts::PlatformVerifier)
                .build(),
        )
        .proxy(proxy)
        .timeout_connect(Some(CONNECT_TIMEOUT))
        .timeout_recv_response(Some(ANSWER_TIMEOUT))
        // A stall, not a total: an 84 MB checkpoint on a slow line takes minutes, and a total
        // body budget would cut every such download short.
        .timeout_per_read(Some(STALL_TIMEOUT))
        .http_status_as_error(false)
        .user_agent(concat!("stemflow/", env!("CARGO_PKG_VERSION")))
        .build()
        .into()
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
            matches!(verify(&path, &wrong_key), Err(FetchError::Checksum { what, .. }) if what.contains("UVR"))
        );
        let wrong_prefix = FileCheck {
            sha256: None,
            sha256_prefix: Some("00000000"),
            ..good
        };
        assert!(matches!(
            verify(&path, &wrong_prefix),
            Err(FetchError::Checksum { what, .. }) if what == "m.onnx"
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
