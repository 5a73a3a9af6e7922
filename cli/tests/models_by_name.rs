//! `stemflow models available` and `stemflow models get NAME` end to end, against a loopback
//! mirror (`STEMFLOW_MODELS_MIRROR`): the owner's terms come first, a file that is not the
//! catalogue's is refused before anything is kept, and a different file already in the models
//! folder is never replaced without `--force`. Never touches the internet.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

/// Serves `body` for every path, recording the paths asked for.
fn mirror(body: Vec<u8>) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/uvr", listener.local_addr().unwrap());
    let paths = Arc::new(Mutex::new(Vec::new()));
    let seen = paths.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            let _ = reader.read_line(&mut request_line);
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
            }
            let path = request_line.split(' ').nth(1).unwrap_or("").to_owned();
            seen.lock().unwrap().push(path);
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&body);
        }
    });
    (url, paths)
}

fn stemflow(args: &[&str], mirror_url: &str) -> Output {
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
    command.output().unwrap()
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
    let output = stemflow(
        &[
            "models",
            "get",
            "kim_vocal_2",
            "--models-dir",
            dir.to_str().unwrap(),
        ],
        &url,
    );
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
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert!(left.is_empty(), "nothing kept: {left:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_different_file_in_the_models_folder_is_not_replaced_without_force() {
    let (url, paths) = mirror(vec![7u8; 1000]);
    let dir = models_dir("kept");
    let mine = dir.join("UVR-MDX-NET-Inst_HQ_3.onnx");
    std::fs::write(&mine, b"my own model").unwrap();
    let output = stemflow(
        &[
            "models",
            "get",
            "UVR-MDX-NET-Inst_HQ_3",
            "--models-dir",
            dir.to_str().unwrap(),
        ],
        &url,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("pass --force"), "{stderr}");
    assert_eq!(std::fs::read(&mine).unwrap(), b"my own model");
    assert!(paths.lock().unwrap().is_empty(), "nothing downloaded");

    // `available` sees it by name.
    let output = stemflow(
        &[
            "models",
            "available",
            "--json",
            "--models-dir",
            dir.to_str().unwrap(),
        ],
        &url,
    );
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
fn a_model_without_its_converter_says_why_and_an_unknown_name_lists_the_known_ones() {
    let (url, paths) = mirror(Vec::new());
    let output = stemflow(&["models", "get", "htdemucs"], &url);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("HTDemucs converter"), "{stderr}");
    let output = stemflow(&["models", "get", "htdemucs_12s"], &url);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("Kim_Vocal_2"), "{stderr}");
    assert!(paths.lock().unwrap().is_empty());
}
