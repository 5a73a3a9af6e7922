//! Downloads against a loopback HTTP server serving a fixture: whole files, connections that
//! drop mid-file, parts left by an earlier run, servers that ignore ranges, damaged and
//! truncated files, files that are gone, busy servers, no server at all, a cancelled download
//! and a full disk. Never touches the internet.

use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};
use stemflow_fetch::catalogue::FileCheck;
use stemflow_fetch::download::{part_path, Downloader};
use stemflow_fetch::FetchError;
use stemflow_kit::testing::{
    serve_http, unused_loopback_port, write_http_head, write_trickle, HttpRequest,
};

/// How the server misbehaves.
#[derive(Default, Clone)]
struct Behaviour {
    /// Close the connection after this many body bytes, for this many requests.
    drop_after: Option<(u64, u32)>,
    /// Answer every request with the whole file (200), ranges or not.
    ignore_ranges: bool,
    /// Serve these bytes instead of the file.
    damaged: Option<Vec<u8>>,
    /// Answer 404.
    gone: bool,
    /// Answer this status instead, for this many requests.
    fail_first: Option<(u16, u32)>,
    /// Send the body in pieces of this many bytes, pausing between them.
    trickle: Option<usize>,
    /// Send this `ETag`, and answer an `If-Range` that names another with the whole file.
    etag: Option<String>,
    /// From this request on (counting from 0), serve these bytes under this `ETag`: the file
    /// changed upstream.
    changes_at: Option<(usize, Vec<u8>, String)>,
}

struct Server {
    url: String,
    /// The `Range` header of every request, in order ("" when none).
    ranges: Arc<Mutex<Vec<String>>>,
    /// The `If-Range` header of every request, in order ("" when none).
    if_ranges: Arc<Mutex<Vec<String>>>,
}

fn serve(file: Vec<u8>, behaviour: Behaviour) -> Server {
    let ranges = Arc::new(Mutex::new(Vec::new()));
    let if_ranges = Arc::new(Mutex::new(Vec::new()));
    let seen = (ranges.clone(), if_ranges.clone());
    let behaviour = Arc::new(Mutex::new(behaviour));
    let url = serve_http(move |request, stream| answer(&request, stream, &file, &behaviour, &seen));
    Server {
        url: format!("{url}/models/m.onnx"),
        ranges,
        if_ranges,
    }
}

type Seen = (Arc<Mutex<Vec<String>>>, Arc<Mutex<Vec<String>>>);

fn answer(
    request: &HttpRequest,
    mut stream: TcpStream,
    file: &[u8],
    behaviour: &Mutex<Behaviour>,
    seen: &Seen,
) {
    let mut range = request.header("range").to_ascii_lowercase();
    let if_range = request.header("if-range").to_owned();
    let request_index = seen.0.lock().unwrap().len();
    seen.0.lock().unwrap().push(range.clone());
    seen.1.lock().unwrap().push(if_range.clone());
    let mut b = behaviour.lock().unwrap();
    let mut file = file.to_vec();
    let mut etag = b.etag.clone();
    if let Some((from, changed, changed_tag)) = &b.changes_at {
        if request_index >= *from {
            file = changed.clone();
            etag = Some(changed_tag.clone());
        }
    }
    // `If-Range` naming another version: the whole (current) file.
    if !if_range.is_empty() && etag.as_deref() != Some(if_range.as_str()) {
        range.clear();
    }
    let etag_header = etag
        .map(|tag| format!("ETag: {tag}\r\n"))
        .unwrap_or_default();
    if let Some((status, times)) = b.fail_first.filter(|&(_, times)| times > 0) {
        b.fail_first = Some((status, times - 1));
        write_http_head(&mut stream, &format!("{status} Busy"), "", 0);
        return;
    }
    if b.gone {
        write_http_head(&mut stream, "404 Not Found", "", 0);
        return;
    }
    let body: Vec<u8> = b.damaged.clone().unwrap_or(file);
    let total = body.len() as u64;
    let start = range
        .strip_prefix("bytes=")
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|_| !b.ignore_ranges);
    let (status, headers, length) = match start {
        Some(start) if start >= total => {
            let content_range = format!("Content-Range: bytes */{total}\r\n");
            write_http_head(&mut stream, "416 Range Not Satisfiable", &content_range, 0);
            return;
        }
        Some(start) => (
            "206 Partial Content",
            format!(
                "{etag_header}Content-Range: bytes {start}-{}/{total}\r\n",
                total - 1
            ),
            total - start,
        ),
        None => ("200 OK", etag_header, total),
    };
    let from = start.unwrap_or(0) as usize;
    let mut to = body.len();
    if let Some((after, times)) = b.drop_after.filter(|&(_, times)| times > 0) {
        to = (from + after as usize).min(to);
        b.drop_after = Some((after, times - 1));
    }
    let trickle = b.trickle;
    drop(b);
    write_http_head(&mut stream, status, &headers, length);
    match trickle {
        Some(piece) => {
            if !write_trickle(
                &mut stream,
                &body[from..to],
                piece,
                Duration::from_millis(5),
            ) {
                return;
            }
        }
        None => {
            let _ = stream.write_all(&body[from..to]);
        }
    }
    let _ = stream.flush();
    // Dropping the stream closes the connection, short of Content-Length when cut.
}

fn no_cancel() -> AtomicBool {
    AtomicBool::new(false)
}

fn fixture() -> Vec<u8> {
    (0..300_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

fn checked(bytes: &[u8]) -> FileCheck {
    let sha256 = format!("{:x}", Sha256::digest(bytes));
    FileCheck {
        sha256: Some(Box::leak(sha256.into_boxed_str())),
        sha256_prefix: None,
        uvr_md5_tail: None,
        size_bytes: Some(bytes.len() as u64),
    }
}

/// `server`'s file fetched into `part` by a direct downloader, checked against `bytes`, with no
/// progress to report and no cancel.
fn fetch_quietly(server: &Server, bytes: &[u8], part: &Path) -> Result<u64, FetchError> {
    Downloader::direct().fetch(
        &server.url,
        &checked(bytes),
        part,
        &mut |_, _| {},
        &no_cancel(),
    )
}

/// The part file of `m.onnx` in a fresh scratch folder.
fn scratch(name: &str) -> PathBuf {
    let dir = stemflow_kit::testing::scratch_dir(&format!("download-{name}"));
    part_path(&dir.join("m.onnx"))
}

#[test]
fn a_whole_file_arrives_checked_with_progress() {
    let bytes = fixture();
    let server = serve(bytes.clone(), Behaviour::default());
    let part = scratch("whole");
    let mut last = (0, None);
    let size = Downloader::direct()
        .fetch(
            &server.url,
            &checked(&bytes),
            &part,
            &mut |done, total| last = (done, total),
            &no_cancel(),
        )
        .unwrap();
    assert_eq!(size, bytes.len() as u64);
    assert_eq!(std::fs::read(&part).unwrap(), bytes);
    assert_eq!(last, (bytes.len() as u64, Some(bytes.len() as u64)));
    assert_eq!(*server.ranges.lock().unwrap(), [""]);
}

#[test]
fn a_dropped_connection_is_resumed_where_it_stopped() {
    let bytes = fixture();
    let server = serve(
        bytes.clone(),
        Behaviour {
            drop_after: Some((100_000, 2)),
            ..Behaviour::default()
        },
    );
    let part = scratch("dropped");
    fetch_quietly(&server, &bytes, &part).unwrap();
    assert_eq!(std::fs::read(&part).unwrap(), bytes);
    assert_eq!(
        *server.ranges.lock().unwrap(),
        ["", "bytes=100000-", "bytes=200000-"],
        "each attempt asks for what is missing"
    );
}

#[test]
fn a_part_left_by_an_earlier_run_is_resumed_and_a_longer_one_restarted() {
    let bytes = fixture();
    let server = serve(bytes.clone(), Behaviour::default());
    let part = scratch("earlier");
    std::fs::write(&part, &bytes[..123_456]).unwrap();
    fetch_quietly(&server, &bytes, &part).unwrap();
    assert_eq!(std::fs::read(&part).unwrap(), bytes);
    assert_eq!(*server.ranges.lock().unwrap(), ["bytes=123456-"]);

    // A part longer than the file: the server cannot resume it; it starts over.
    let mut longer = bytes.clone();
    longer.extend_from_slice(b"junk");
    std::fs::write(&part, &longer).unwrap();
    fetch_quietly(&server, &bytes, &part).unwrap();
    assert_eq!(std::fs::read(&part).unwrap(), bytes);
}

#[test]
fn a_server_that_ignores_ranges_sends_the_whole_file_again() {
    let bytes = fixture();
    let server = serve(
        bytes.clone(),
        Behaviour {
            ignore_ranges: true,
            ..Behaviour::default()
        },
    );
    let part = scratch("ignores");
    std::fs::write(&part, vec![0xAA; 50_000]).unwrap();
    fetch_quietly(&server, &bytes, &part).unwrap();
    assert_eq!(
        std::fs::read(&part).unwrap(),
        bytes,
        "the stale part is replaced"
    );
}

#[test]
fn a_damaged_file_is_refused_and_its_part_deleted() {
    let bytes = fixture();
    let mut damaged = bytes.clone();
    damaged[1000] ^= 1;
    let server = serve(
        bytes.clone(),
        Behaviour {
            damaged: Some(damaged),
            ..Behaviour::default()
        },
    );
    let part = scratch("damaged");
    let error = fetch_quietly(&server, &bytes, &part).unwrap_err();
    assert!(
        matches!(&error, FetchError::Checksum { what, .. } if what == "m.onnx"),
        "{error:?}"
    );
    assert!(
        !part.exists(),
        "a part that failed its check is never resumed"
    );
}

#[test]
fn a_file_that_is_gone_says_so_without_retrying() {
    let bytes = fixture();
    let server = serve(
        bytes.clone(),
        Behaviour {
            gone: true,
            ..Behaviour::default()
        },
    );
    let part = scratch("gone");
    let error = fetch_quietly(&server, &bytes, &part).unwrap_err();
    assert!(
        matches!(&error, FetchError::Download(m) if m.contains("HTTP 404") && m.contains("no longer publishes")),
        "{error:?}"
    );
    assert_eq!(server.ranges.lock().unwrap().len(), 1);
}

#[test]
fn a_server_that_keeps_dropping_is_given_up_on_with_the_part_kept_for_later() {
    let bytes = fixture();
    let server = serve(
        bytes.clone(),
        Behaviour {
            drop_after: Some((10_000, 100)),
            ..Behaviour::default()
        },
    );
    let part = scratch("keeps-dropping");
    let error = fetch_quietly(&server, &bytes, &part).unwrap_err();
    assert!(
        matches!(&error, FetchError::Download(m) if m.contains("gave up after 20 attempts") && m.contains("resume")),
        "{error:?}"
    );
    assert_eq!(
        std::fs::metadata(&part).unwrap().len(),
        200_000,
        "twenty attempts kept"
    );
}

#[test]
fn a_line_that_drops_often_still_finishes_as_long_as_each_attempt_brings_bytes() {
    let bytes = fixture();
    let server = serve(
        bytes.clone(),
        Behaviour {
            drop_after: Some((40_000, 7)),
            ..Behaviour::default()
        },
    );
    let part = scratch("drops-often");
    fetch_quietly(&server, &bytes, &part).unwrap();
    assert_eq!(std::fs::read(&part).unwrap(), bytes);
    assert_eq!(server.ranges.lock().unwrap().len(), 8);
}

#[test]
fn a_busy_server_is_retried_and_a_refusal_is_not() {
    let bytes = fixture();
    let server = serve(
        bytes.clone(),
        Behaviour {
            fail_first: Some((503, 2)),
            ..Behaviour::default()
        },
    );
    let part = scratch("busy");
    fetch_quietly(&server, &bytes, &part).unwrap();
    assert_eq!(std::fs::read(&part).unwrap(), bytes);
    assert_eq!(
        server.ranges.lock().unwrap().len(),
        3,
        "two 503s, then the file"
    );

    let server = serve(
        bytes.clone(),
        Behaviour {
            fail_first: Some((403, 100)),
            ..Behaviour::default()
        },
    );
    let part = scratch("refused");
    let error = fetch_quietly(&server, &bytes, &part).unwrap_err();
    assert!(
        matches!(&error, FetchError::Download(m) if m.contains("HTTP 403")),
        "{error:?}"
    );
    assert_eq!(server.ranges.lock().unwrap().len(), 1, "not retried");
}

#[test]
fn a_truncated_file_is_refused_by_its_size_or_its_hash_and_nothing_kept() {
    let bytes = fixture();
    let server = serve(
        bytes.clone(),
        Behaviour {
            damaged: Some(bytes[..200_000].to_vec()),
            ..Behaviour::default()
        },
    );
    // The catalogue knows the size: refused before a byte is written.
    let part = scratch("truncated-size");
    let error = fetch_quietly(&server, &bytes, &part).unwrap_err();
    assert!(
        matches!(&error, FetchError::Download(m) if m.contains("is 200000 bytes, the catalogue says 300000")),
        "{error:?}"
    );
    assert!(!part.exists());
    // Only the hash: downloaded, refused, deleted.
    let part = scratch("truncated-hash");
    let check = FileCheck {
        size_bytes: None,
        ..checked(&bytes)
    };
    let error = Downloader::direct()
        .fetch(&server.url, &check, &part, &mut |_, _| {}, &no_cancel())
        .unwrap_err();
    assert!(matches!(&error, FetchError::Checksum { .. }), "{error:?}");
    assert!(!part.exists());
}

#[test]
fn a_cancelled_download_stops_and_keeps_its_part_for_the_next_attempt() {
    let bytes = fixture();
    let server = serve(
        bytes.clone(),
        Behaviour {
            trickle: Some(10_000),
            ..Behaviour::default()
        },
    );
    let part = scratch("cancelled");
    let cancel = AtomicBool::new(false);
    let error = Downloader::direct()
        .fetch(
            &server.url,
            &checked(&bytes),
            &part,
            &mut |done, _| {
                if done >= 50_000 {
                    cancel.store(true, Ordering::Relaxed);
                }
            },
            &cancel,
        )
        .unwrap_err();
    assert_eq!(error, FetchError::Cancelled);
    let kept = std::fs::metadata(&part).unwrap().len();
    assert!((50_000..bytes.len() as u64).contains(&kept), "{kept}");
    assert_eq!(std::fs::read(&part).unwrap(), bytes[..kept as usize]);
    // The next attempt resumes it.
    fetch_quietly(&server, &bytes, &part).unwrap();
    assert_eq!(std::fs::read(&part).unwrap(), bytes);
    assert_eq!(
        server.ranges.lock().unwrap().last().unwrap(),
        &format!("bytes={kept}-")
    );
}

#[test]
fn no_server_at_all_is_unreachable() {
    // A port that nothing listens on.
    let port = unused_loopback_port();
    let part = scratch("unreachable");
    let bytes = fixture();
    let error = Downloader::direct()
        .fetch(
            &format!("http://127.0.0.1:{port}/m.onnx"),
            &checked(&bytes),
            &part,
            &mut |_, _| {},
            &no_cancel(),
        )
        .unwrap_err();
    assert!(
        matches!(&error, FetchError::Unreachable(m) if m.contains("tried 3 times")),
        "{error:?}"
    );
}

#[test]
#[cfg(target_os = "linux")]
fn a_full_disk_fails_at_once_and_says_so() {
    let bytes = fixture();
    let server = serve(bytes.clone(), Behaviour::default());
    let part = scratch("full-disk");
    // /dev/full: every write fails with ENOSPC, as on a full disk.
    std::os::unix::fs::symlink("/dev/full", &part).unwrap();
    let error = fetch_quietly(&server, &bytes, &part).unwrap_err();
    assert!(
        matches!(&error, FetchError::Io(m) if m.contains("the disk is full")),
        "{error:?}"
    );
    assert_eq!(server.ranges.lock().unwrap().len(), 1, "not retried");
}

#[test]
fn a_file_changed_upstream_restarts_and_is_never_spliced() {
    let old = fixture();
    let new: Vec<u8> = old.iter().map(|b| b ^ 0x5a).collect();
    // The first answer brings 100,000 bytes of the old file and drops; by the resume the
    // owner has published a new file under the same URL.
    let server = serve(
        old.clone(),
        Behaviour {
            etag: Some("\"v1\"".into()),
            drop_after: Some((100_000, 1)),
            changes_at: Some((1, new.clone(), "\"v2\"".into())),
            ..Behaviour::default()
        },
    );
    let part = scratch("changed-upstream");
    Downloader::direct()
        .fetch(
            &server.url,
            &checked(&new),
            &part,
            &mut |_, _| {},
            &no_cancel(),
        )
        .unwrap();
    assert_eq!(std::fs::read(&part).unwrap(), new, "the new file, whole");
    assert_eq!(*server.ranges.lock().unwrap(), ["", "bytes=100000-"]);
    assert_eq!(
        *server.if_ranges.lock().unwrap(),
        ["", "\"v1\""],
        "the resume asks for the rest of the first version only"
    );
}

#[test]
fn the_size_cap_holds_over_all_attempts_not_per_answer() {
    let bytes = fixture();
    // Every answer is the whole file from its start and drops at 120,000 bytes: each attempt
    // is under the cap, the three together are not.
    let server = serve(
        bytes.clone(),
        Behaviour {
            ignore_ranges: true,
            drop_after: Some((120_000, 100)),
            ..Behaviour::default()
        },
    );
    let part = scratch("capped");
    let error = Downloader::direct()
        .with_max_file_bytes(310_000)
        .fetch(
            &server.url,
            &FileCheck {
                size_bytes: None,
                ..checked(&bytes)
            },
            &part,
            &mut |_, _| {},
            &no_cancel(),
        )
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("more than 310000 bytes over all attempts"),
        "{error}"
    );
    assert_eq!(server.ranges.lock().unwrap().len(), 3);
}
