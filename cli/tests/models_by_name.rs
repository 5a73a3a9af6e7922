//! `stemflow models available`, `stemflow models get NAME` and `stemflow models import FILE` end
//! to end, against a loopback mirror (`STEMFLOW_MODELS_MIRROR`): the owner's terms come first
//! and must be accepted, a file that is not the catalogue's is refused before anything is kept
//! (downloaded or given with `--from-file`), a different file already in the models folder is
//! never replaced without `--force`, an unreachable owner gets the URLs to fetch by hand, and a
//! download that is killed or interrupted leaves nothing under a model's name. Never touches
//! the internet.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use stemflow_kit::testing::{fixtures_dir, serve_http, unused_loopback_port, write_http_head};

/// The terms record and the downloads folder `models get` keeps in the models folder.
const TERMS_RECORD: &str = ".terms-accepted.json";

/// Serves `body` for every path, recording the paths asked for.
fn mirror(body: Vec<u8>) -> (String, Arc<Mutex<Vec<String>>>) {
    let paths = Arc::new(Mutex::new(Vec::new()));
    let seen = paths.clone();
    let url = serve_http(move |request, mut stream| {
        seen.lock().unwrap().push(request.path);
        write_http_head(&mut stream, "200 OK", "", body.len() as u64);
        let _ = stream.write_all(&body);
    });
    (format!("{url}/uvr"), paths)
}

/// `stemflow ARGS` fetching from `mirror_url`, with no proxy between.
fn stemflow_command(args: &[&str], mirror_url: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_stemflow"));
    command.args(args).env("STEMFLOW_MODELS_MIRROR", mirror_url);
    for proxy in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ] {
        command.env_remove(proxy);
    }
    command
}

fn stemflow(args: &[&str], mirror_url: &str) -> Output {
    stemflow_command(args, mirror_url).output().unwrap()
}

/// `stemflow ARGS --models-dir DIR` fetching from `mirror_url`.
fn in_models_dir(args: &[&str], dir: &Path, mirror_url: &str) -> Output {
    let mut args = args.to_vec();
    args.extend(["--models-dir", dir.to_str().unwrap()]);
    stemflow(&args, mirror_url)
}

/// `stemflow models get NAME --accept-terms --models-dir DIR` fetching from `mirror_url`.
fn get_accepting_terms(name: &str, dir: &Path, mirror_url: &str) -> Output {
    in_models_dir(&["models", "get", name, "--accept-terms"], dir, mirror_url)
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn models_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stemflow-by-name-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_file_that_is_not_the_catalogues_is_refused_and_nothing_is_kept() {
    let (url, paths) = mirror(vec![7u8; 1000]);
    let dir = models_dir("refused");
    let output = get_accepting_terms("kim_vocal_2", &dir, &url);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("credit UVR"),
        "the terms come first: {stderr}"
    );
    assert!(
        stderr.contains("is 1000 bytes, the catalogue says 66759214"),
        "{stderr}"
    );
    assert_eq!(*paths.lock().unwrap(), ["/uvr/Kim_Vocal_2.onnx"]);
    assert_eq!(
        names_in(&dir),
        [TERMS_RECORD],
        "nothing kept but the acceptance"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_different_file_in_the_models_folder_is_not_replaced_without_force() {
    let (url, paths) = mirror(vec![7u8; 1000]);
    let dir = models_dir("kept");
    let mine = dir.join("UVR-MDX-NET-Inst_HQ_3.onnx");
    std::fs::write(&mine, b"my own model").unwrap();
    let output = get_accepting_terms("UVR-MDX-NET-Inst_HQ_3", &dir, &url);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("pass --force"), "{stderr}");
    assert_eq!(std::fs::read(&mine).unwrap(), b"my own model");
    assert!(paths.lock().unwrap().is_empty(), "nothing downloaded");

    // `available` sees it by name.
    let output = in_models_dir(&["models", "available", "--json"], &dir, &url);
    assert!(output.status.success());
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let entry = |name: &str| {
        json.as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(entry("UVR-MDX-NET-Inst_HQ_3")["installed"], true);
    assert_eq!(entry("Kim_Vocal_2")["installed"], false);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn terms_that_were_not_accepted_stop_everything_and_an_unknown_name_lists_the_known_ones() {
    let (url, paths) = mirror(Vec::new());
    let dir = models_dir("terms");
    let output = in_models_dir(&["models", "get", "htdemucs"], &dir, &url);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("not covered by the MIT license"),
        "the terms are shown: {stderr}"
    );
    assert!(stderr.contains("pass --accept-terms"), "{stderr}");
    assert!(names_in(&dir).is_empty(), "nothing written");
    let output = stemflow(&["models", "get", "htdemucs_12s"], &url);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("Kim_Vocal_2"), "{stderr}");
    assert!(paths.lock().unwrap().is_empty(), "nothing downloaded");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_file_given_by_hand_that_is_not_the_models_is_refused_with_what_is_expected() {
    let (url, paths) = mirror(Vec::new());
    let dir = models_dir("from-file");
    let wrong = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../convert/tests/fixtures/torch/demucs_like_zip.th");
    let output = in_models_dir(
        &[
            "models",
            "get",
            "htdemucs",
            "--accept-terms",
            "--from-file",
            wrong.to_str().unwrap(),
        ],
        &dir,
        &url,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("demucs_like_zip.th has SHA-256")
            && stderr.contains("one of htdemucs's files (955717e8-8726e21a.th: 8726e21a"),
        "{stderr}"
    );
    assert_eq!(names_in(&dir), [TERMS_RECORD], "no model");
    assert!(paths.lock().unwrap().is_empty(), "nothing downloaded");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_owner_that_cannot_be_reached_gets_the_urls_and_the_from_file_command() {
    // A port that nothing listens on.
    let port = unused_loopback_port();
    let dir = models_dir("offline");
    let output = get_accepting_terms("htdemucs_ft", &dir, &format!("http://127.0.0.1:{port}"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("cannot reach the source"), "{stderr}");
    for file in [
        "f7e0c4bc-ba3fe64a.th",
        "d12395a8-e57c48e6.th",
        "92cfc3b6-ef3bcb9c.th",
        "04573f0d-f3cf25b2.th",
    ] {
        assert!(
            stderr.contains(&format!(
                "https://dl.fbaipublicfiles.com/demucs/hybrid_transformer/{file}"
            )),
            "{stderr}"
        );
        assert!(stderr.contains(&format!("--from-file {file}")), "{stderr}");
    }
    assert!(stderr.contains("stemflow models get htdemucs_ft --accept-terms"));
    assert!(!dir.join("htdemucs_ft.onnx").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A mirror that announces `length` bytes and sends zeros slowly, forever (until the client
/// goes): a download in progress.
fn slow_mirror(length: u64) -> String {
    let url = serve_http(move |_, mut stream| {
        std::thread::spawn(move || {
            write_http_head(&mut stream, "200 OK", "", length);
            let zeros = [0u8; 8192];
            while stream.write_all(&zeros).is_ok() {
                std::thread::sleep(Duration::from_millis(20));
            }
        });
    });
    format!("{url}/m")
}

/// Starts `models get NAME` against `url` and waits until its part holds some bytes.
fn download_in_progress(name: &str, url: &str, dir: &Path) -> std::process::Child {
    let args = [
        "models",
        "get",
        name,
        "--accept-terms",
        "--models-dir",
        dir.to_str().unwrap(),
    ];
    let child = stemflow_command(&args, url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let part = dir.join(format!(".downloads/{name}.onnx.part"));
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0) < 50_000 {
        assert!(Instant::now() < deadline, "the download never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

#[test]
fn a_killed_download_leaves_nothing_under_the_models_name() {
    let url = slow_mirror(66_759_214);
    let dir = models_dir("killed");
    let mut child = download_in_progress("Kim_Vocal_2", &url, &dir);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!dir.join("Kim_Vocal_2.onnx").exists());
    assert!(!dir.join("Kim_Vocal_2.TERMS.txt").exists());
    assert!(
        dir.join(".downloads/Kim_Vocal_2.onnx.part").exists(),
        "kept to resume"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[cfg(unix)]
fn ctrl_c_stops_a_download_cleanly_and_says_where_it_resumes() {
    let url = slow_mirror(66_759_214);
    let dir = models_dir("interrupted");
    let child = download_in_progress("Kim_Vocal_2", &url, &dir);
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("interrupted (Ctrl-C); nothing was installed")
            && stderr.contains("resumed by the next `stemflow models get Kim_Vocal_2`"),
        "{stderr}"
    );
    assert!(!dir.join("Kim_Vocal_2.onnx").exists());
    assert!(dir.join(".downloads/Kim_Vocal_2.onnx.part").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn importing_a_file_that_is_no_model_writes_nothing() {
    let dir = models_dir("import-bad");
    let given = dir.join("given");
    std::fs::create_dir_all(&given).unwrap();
    let models = dir.join("models");
    let cases: [(&str, &[u8], &str); 4] = [
        ("notes.th", b"just some notes", "not a torch checkpoint"),
        (
            "weights.ckpt",
            b"whatever",
            "needs the YAML config it was trained with",
        ),
        (
            "bag.yaml",
            b"audio:\n  chunk_size: 485100\n",
            "is not a demucs bag",
        ),
        (
            "song.mp3",
            b"ID3",
            "not a file `stemflow models import` knows",
        ),
    ];
    for (name, bytes, expected) in cases {
        let file = given.join(name);
        std::fs::write(&file, bytes).unwrap();
        let output = in_models_dir(&["models", "import", file.to_str().unwrap()], &models, "");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{name}");
        assert!(stderr.contains(expected), "{name}: {stderr}");
    }
    // A demucs-like package that is no HTDemucs reaches the converter, which refuses it.
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../convert/tests/fixtures/torch/demucs_like_zip.th");
    let output = in_models_dir(
        &["models", "import", fixture.to_str().unwrap()],
        &models,
        "",
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("demucs_like_zip.th: "), "{stderr}");
    assert!(!models.exists(), "nothing written");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_onnx_model_the_engine_recognises_is_imported_with_its_sidecar_and_a_bad_one_is_not() {
    let fixtures = fixtures_dir();
    assert!(
        std::env::var_os("STEMFLOW_ORT_LIB").is_some(),
        "STEMFLOW_ORT_LIB must point at ONNX Runtime: run the tests with `cargo xtask test`"
    );
    let dir = models_dir("import-onnx");
    let models = dir.join("models");
    let import = |file: &Path, extra: &[&str]| {
        let mut args = vec!["models", "import", file.to_str().unwrap()];
        args.extend_from_slice(extra);
        in_models_dir(&args, &models, "")
    };
    // MDX-Net with its parameters in a sidecar: both come in under the new name.
    let output = import(
        &fixtures.join("mdx_vocals_test.onnx"),
        &["--name", "my-vocals"],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("my-vocals (MDX-Net"), "{stdout}");
    assert_eq!(
        std::fs::read(models.join("my-vocals.onnx")).unwrap(),
        std::fs::read(fixtures.join("mdx_vocals_test.onnx")).unwrap()
    );
    assert!(models.join("my-vocals.json").is_file());
    let listed = in_models_dir(&["models", "--json"], &models, "");
    let json: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let entry = json["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "my-vocals")
        .expect("listed")
        .clone();
    assert_eq!(entry["error"], serde_json::Value::Null, "{entry}");
    // Again: nothing to do. Another model under the same name: not without --force.
    let again = import(
        &fixtures.join("mdx_vocals_test.onnx"),
        &["--name", "my-vocals"],
    );
    assert!(String::from_utf8_lossy(&again.stdout).contains("already there"));
    let other = import(
        &fixtures.join("htdemucs_test.onnx"),
        &["--name", "my-vocals"],
    );
    let stderr = String::from_utf8_lossy(&other.stderr);
    assert!(!other.status.success());
    assert!(stderr.contains("exists and differs"), "{stderr}");
    // Not a model: refused by the engine's check, nothing written.
    let bad = dir.join("notes.onnx");
    std::fs::write(&bad, b"not a graph").unwrap();
    let output = import(&bad, &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("is not a model Stemflow can run"),
        "{stderr}"
    );
    assert!(!models.join("notes.onnx").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_demucs_checkpoint_of_ones_own_is_imported_converted() {
    let dir = models_dir("import-th");
    let models = dir.join("models");
    let checkpoint =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../convert/tests/fixtures/htdemucs/small.th");
    let output = in_models_dir(
        &[
            "models",
            "import",
            checkpoint.to_str().unwrap(),
            "--name",
            "my-htdemucs",
        ],
        &models,
        "",
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("my-htdemucs (converted from a demucs checkpoint"),
        "{stdout}"
    );
    let onnx = std::fs::read(models.join("my-htdemucs.onnx")).unwrap();
    assert!(onnx.len() > 100_000, "a model, not a stub");
    // The model and its graphs for GPUs (float32 and float16) beside it.
    assert_eq!(
        names_in(&models),
        [
            "my-htdemucs.gpu-f16.onnx",
            "my-htdemucs.gpu.onnx",
            "my-htdemucs.onnx"
        ]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
