//! [`import_model`]: a checkpoint the user has — their own fine-tuned HTDemucs, a bag of them,
//! an ONNX export — into the models folder (`stemflow models import`).
//!
//! - `.onnx`: checked by the caller's validator (the engine must recognise its family), then
//!   copied in with its sidecar (`.json`, `.yaml`, `.yml`: MDX-Net parameters, an MSST
//!   config) renamed alike.
//! - `.th`: a demucs package (`klass`, `kwargs`, `state`), converted by
//!   [`demucs_to_onnx`](stemflow_convert::htdemucs::demucs_to_onnx).
//! - `.yaml`: a demucs bag (demucs' `remote/NAME.yaml`: `models: [sig, …]`, optional
//!   `weights:` and `segment:`), its checkpoints `<sig>-*.th` in the same folder, converted
//!   into one model. A `<sig>-<8 hex digits>.th` name is checked against the file's SHA-256,
//!   as demucs checks it.
//! - `.ckpt`: an MSST BS- or Mel-RoFormer state dict with its YAML config (`--config`, or
//!   `<model>.yaml` next to it), converted by
//!   [`roformer_to_onnx`](stemflow_convert::roformer::roformer_to_onnx). The model carries the config's
//!   processing parameters in its metadata, so no sidecar is written.
//!
//! Files are written as [`get`](crate::get) writes them: through a synced temporary file in the
//! models folder, never replacing a different file without `force`, every target checked before
//! any is written. Not realtime-safe.

use std::path::{Path, PathBuf};

use serde_json::Value;
use stemflow_convert::htdemucs::{demucs_to_onnx, demucs_to_onnx_for};
use stemflow_convert::mdx::{mdx_gpu_graph, MdxStft};
use stemflow_convert::roformer::{read_config, roformer_to_onnx, roformer_to_onnx_for};
use stemflow_convert::torch::load_torch_checkpoint;
use stemflow_convert::yaml::read_yaml;
use stemflow_convert::{ConvertError, Target};

use crate::error::FetchError;
use crate::files::{read_limited, sha256_hex, write_all_or_none};
use crate::gpu_graphs::PendingGpuGraphs;

/// No checkpoint or model imported is larger.
const MAX_IMPORT_BYTES: u64 = 4 << 30;
/// No bag file is larger.
const MAX_BAG_YAML_BYTES: u64 = 1 << 20;

/// What was imported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportKind {
    /// An ONNX model, copied.
    Onnx,
    /// One demucs checkpoint, converted.
    DemucsCheckpoint,
    /// A demucs bag of checkpoints, converted into one model.
    DemucsBag,
    /// An MSST RoFormer checkpoint with its config, converted.
    MsstCheckpoint,
}

/// What [`import_model`] may do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportOptions {
    /// The installed model's name (default: the file's stem).
    pub name: Option<String>,
    /// An MSST config for a `.ckpt` checkpoint.
    pub config: Option<PathBuf>,
    /// Replace different files of the same names.
    pub force: bool,
}

/// What [`import_model`] left in the models folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    /// What the file was.
    pub kind: ImportKind,
    /// The model.
    pub model: PathBuf,
    /// Sidecars copied with it, and the graphs for GPUs written beside a converted model.
    pub also: Vec<PathBuf>,
    /// Files that were already there with the same content (nothing was rewritten).
    pub unchanged: Vec<PathBuf>,
    /// SHA-256 of the model.
    pub model_sha256: String,
}

/// Imports `file` into `models_dir` (see the module documentation for each kind of file).
/// `validate_onnx` checks an ONNX model where it lies (with its sidecars), returning why the
/// engine cannot run it, or, for an MDX-Net model, the STFT its graph for GPUs wraps it in
/// (written beside it). Not realtime-safe: reads, converts and writes files.
pub fn import_model(
    file: &Path,
    models_dir: &Path,
    options: &ImportOptions,
    validate_onnx: &mut dyn FnMut(&Path) -> Result<Option<MdxStft>, String>,
) -> Result<Imported, FetchError> {
    let extension = file
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    if !file.is_file() {
        return Err(FetchError::Io(format!("{}: no such file", file.display())));
    }
    let name = model_name(file, options.name.as_deref())?;
    let model_path = models_dir.join(format!("{name}.onnx"));
    // Each kind's graphs for GPUs are converted before anything is written.
    let (
        kind,
        Model {
            bytes: model_bytes,
            gpu_graphs,
        },
        mut files,
    ) = match extension.as_str() {
        "onnx" => {
            let (model, sidecars) =
                onnx_model(file, &name, models_dir, &model_path, validate_onnx)?;
            (ImportKind::Onnx, model, sidecars)
        }
        "th" | "pt" | "pth" => (
            ImportKind::DemucsCheckpoint,
            demucs_checkpoint(file, &model_path)?,
            Vec::new(),
        ),
        "yaml" | "yml" => (
            ImportKind::DemucsBag,
            demucs_bag(file, &model_path)?,
            Vec::new(),
        ),
        "ckpt" => (
            ImportKind::MsstCheckpoint,
            msst_checkpoint(file, options, &model_path)?,
            Vec::new(),
        ),
        _ => {
            return Err(FetchError::layout(format!(
                "{}: not a file `stemflow models import` knows: it takes an .onnx model, a demucs \
                 checkpoint (.th), a demucs bag (.yaml) or an MSST RoFormer .ckpt (with --config)",
                file.display()
            )))
        }
    };
    let model_sha256 = sha256_hex(&model_bytes);
    // The model goes last, so it never appears without its sidecars.
    files.push((model_path.clone(), model_bytes));
    let unchanged = write_all_or_none(&files, models_dir, options.force, |path| {
        format!(
            "{} exists and differs; choose another name with --name, or pass --force to \
             replace it (nothing was written)",
            path.display()
        )
    })?;
    let mut also: Vec<PathBuf> = files
        .into_iter()
        .map(|(path, _)| path)
        .filter(|path| *path != model_path)
        .collect();
    if let Some(gpu_graphs) = gpu_graphs {
        also.extend(gpu_graphs.install()?);
    }
    Ok(Imported {
        kind,
        model: model_path.clone(),
        also,
        unchanged,
        model_sha256,
    })
}

/// A file to write: where, and its bytes.
type NamedFile = (PathBuf, Vec<u8>);

/// A model to import: its bytes, and its graphs for GPUs waiting to be written beside it.
struct Model {
    bytes: Vec<u8>,
    gpu_graphs: Option<PendingGpuGraphs>,
}

/// An ONNX model the engine can run, as it is, with its sidecars (`.json`, `.yaml`, `.yml`:
/// MDX-Net parameters, an MSST config) renamed after `name` in `models_dir`.
fn onnx_model(
    file: &Path,
    name: &str,
    models_dir: &Path,
    model_path: &Path,
    validate_onnx: &mut dyn FnMut(&Path) -> Result<Option<MdxStft>, String>,
) -> Result<(Model, Vec<NamedFile>), FetchError> {
    let stft = validate_onnx(file).map_err(|reason| {
        FetchError::layout(format!(
            "{} is not a model Stemflow can run: {reason}",
            file.display()
        ))
    })?;
    let mut sidecars = Vec::new();
    for sidecar_extension in ["json", "yaml", "yml"] {
        let sidecar = file.with_extension(sidecar_extension);
        if sidecar.is_file() {
            sidecars.push((
                models_dir.join(format!("{name}.{sidecar_extension}")),
                read_limited(&sidecar, MAX_BAG_YAML_BYTES)?,
            ));
        }
    }
    let bytes = read_limited(file, MAX_IMPORT_BYTES)?;
    // A published MDX-Net graph gets its graphs for GPUs, the STFT around it.
    let gpu_graphs = match stft {
        Some(stft) => Some(PendingGpuGraphs::convert(
            model_path,
            &|target| match target {
                Target::Gpu(precision) => Ok(Some(mdx_gpu_graph(&bytes, stft, precision)?)),
                Target::Cpu => Ok(None),
            },
        )?),
        None => None,
    };
    Ok((Model { bytes, gpu_graphs }, sidecars))
}

/// One demucs checkpoint, converted (its graphs for GPUs too).
fn demucs_checkpoint(file: &Path, model_path: &Path) -> Result<Model, FetchError> {
    let bytes = read_limited(file, MAX_IMPORT_BYTES)?;
    check_demucs_package(file, &bytes)?;
    let in_file = |e: FetchError| e.with_context(&format!("{}: ", file.display()), "");
    let gpu_graphs = PendingGpuGraphs::convert(model_path, &|target| {
        Ok(Some(demucs_to_onnx_for(&[&bytes], None, target)?.onnx))
    })
    .map_err(in_file)?;
    let converted = demucs_to_onnx(&[&bytes], None).map_err(|e| in_file(e.into()))?;
    Ok(Model {
        bytes: converted.onnx,
        gpu_graphs: Some(gpu_graphs),
    })
}

/// A demucs bag and its checkpoints beside it, converted into one model (its graphs for GPUs
/// too).
fn demucs_bag(file: &Path, model_path: &Path) -> Result<Model, FetchError> {
    let text = String::from_utf8(read_limited(file, MAX_BAG_YAML_BYTES)?)
        .map_err(|_| FetchError::layout(format!("{} is not text", file.display())))?;
    let bag = parse_bag_yaml(&text).map_err(|e| {
        FetchError::layout(format!(
            "{} is not a demucs bag: {e} (a RoFormer config goes with --config next to its \
             .ckpt)",
            file.display()
        ))
    })?;
    let folder = file.parent().unwrap_or(Path::new("."));
    let mut checkpoints = Vec::new();
    for signature in &bag.models {
        let path = bag_checkpoint(folder, signature)?;
        let bytes = read_limited(&path, MAX_IMPORT_BYTES)?;
        check_signature_hash(&path, &bytes)?;
        check_demucs_package(&path, &bytes)?;
        checkpoints.push(bytes);
    }
    let refs: Vec<&[u8]> = checkpoints.iter().map(Vec::as_slice).collect();
    let weights: Option<Vec<&[f32]>> = bag
        .weights
        .as_ref()
        .map(|rows| rows.iter().map(Vec::as_slice).collect());
    let in_file = |e: FetchError| e.with_context(&format!("{}: ", file.display()), "");
    let gpu_graphs = PendingGpuGraphs::convert(model_path, &|target| {
        Ok(Some(
            demucs_to_onnx_for(&refs, weights.as_deref(), target)?.onnx,
        ))
    })
    .map_err(in_file)?;
    let converted = demucs_to_onnx(&refs, weights.as_deref()).map_err(|e| in_file(e.into()))?;
    Ok(Model {
        bytes: converted.onnx,
        gpu_graphs: Some(gpu_graphs),
    })
}

/// An MSST RoFormer checkpoint with its config (`--config`, else `<model>.yaml` beside it),
/// converted (its graphs for GPUs too).
fn msst_checkpoint(
    file: &Path,
    options: &ImportOptions,
    model_path: &Path,
) -> Result<Model, FetchError> {
    let config = match &options.config {
        Some(config) => config.clone(),
        None => file.with_extension("yaml"),
    };
    if !config.is_file() {
        return Err(FetchError::layout(format!(
            "{}: an MSST RoFormer checkpoint needs the YAML config it was trained with: pass it \
             with --config MODEL.yaml{}",
            file.display(),
            if options.config.is_some() {
                format!(" ({} is not a file)", config.display())
            } else {
                String::new()
            }
        )));
    }
    let config_error = |message: String| {
        FetchError::Convert(ConvertError::Config(format!(
            "{}: {message}",
            config.display()
        )))
    };
    let yaml = String::from_utf8(read_limited(&config, MAX_BAG_YAML_BYTES)?)
        .map_err(|_| config_error("not a YAML config: it is not UTF-8 text".into()))?;
    let bytes = read_limited(file, MAX_IMPORT_BYTES)?;
    let context = format!("{} with {}: ", file.display(), config.display());
    // A wrong config is the config's error, named by its file, before any graph is built.
    read_config(&bytes, &yaml).map_err(|error| match error {
        ConvertError::Config(message) => config_error(message),
        error => FetchError::from(error).with_context(&context, ""),
    })?;
    let gpu_graphs = PendingGpuGraphs::convert(model_path, &|target| {
        Ok(Some(roformer_to_onnx_for(&bytes, &yaml, target)?.onnx))
    })
    .map_err(|e| e.with_context(&context, ""))?;
    let converted = roformer_to_onnx(&bytes, &yaml).map_err(|e| e.with_context(&context, ""))?;
    Ok(Model {
        bytes: converted.onnx,
        gpu_graphs: Some(gpu_graphs),
    })
}

/// The installed name: `name`, or the file's stem; a plain file name, not a path.
fn model_name(file: &Path, name: Option<&str>) -> Result<String, FetchError> {
    let name = match name {
        Some(name) => name.trim().to_owned(),
        None => file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    let is_plain = !name.is_empty()
        && !name.starts_with('.')
        && !name.contains(['/', '\\', ':'])
        && name.chars().all(|c| !c.is_control());
    if is_plain {
        Ok(name)
    } else {
        Err(FetchError::Io(format!(
            "`{name}` cannot be a model's name: use letters, digits, '-' or '_' (--name NAME)"
        )))
    }
}

/// Refuses a file that is not a demucs package (`klass`, `kwargs` and `state`), naming what it
/// is instead.
fn check_demucs_package(path: &Path, bytes: &[u8]) -> Result<(), FetchError> {
    let checkpoint = load_torch_checkpoint(bytes)
        .map_err(|e| e.with_context(&format!("{}: ", path.display()), ""))?;
    let missing: Vec<&str> = ["klass", "kwargs", "state"]
        .into_iter()
        .filter(|key| checkpoint.root.get(key).is_none())
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(FetchError::layout(format!(
            "{} is a torch checkpoint but not a demucs package (it has no {}): import takes the \
             .th files demucs saves (klass, kwargs, state)",
            path.display(),
            missing.join(", ")
        )))
    }
}

/// The checkpoint of bag member `signature` in `folder`: `<signature>-*.th` or
/// `<signature>.th`.
fn bag_checkpoint(folder: &Path, signature: &str) -> Result<PathBuf, FetchError> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(folder)
        .map_err(|e| FetchError::Io(format!("{}: {e}", folder.display())))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            name == format!("{signature}.th")
                || (name.starts_with(&format!("{signature}-")) && name.ends_with(".th"))
        })
        .collect();
    found.sort();
    match found.as_slice() {
        [path] => Ok(path.clone()),
        [] => Err(FetchError::Io(format!(
            "the bag names model {signature}, but {} holds no {signature}-*.th: put its \
             checkpoint next to the yaml",
            folder.display()
        ))),
        _ => Err(FetchError::Io(format!(
            "{} holds several checkpoints of model {signature} ({}); keep one",
            folder.display(),
            found
                .iter()
                .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// demucs' own check: a file named `<signature>-<8 hex digits>.th` has a SHA-256 starting with
/// those digits.
fn check_signature_hash(path: &Path, bytes: &[u8]) -> Result<(), FetchError> {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let Some((_, prefix)) = stem.rsplit_once('-') else {
        return Ok(());
    };
    let is_hash = prefix.len() == 8 && prefix.bytes().all(|b| b.is_ascii_hexdigit());
    let sha256 = sha256_hex(bytes);
    if is_hash && !sha256.starts_with(&prefix.to_ascii_lowercase()) {
        return Err(FetchError::Checksum {
            what: path.display().to_string(),
            expected: format!("{prefix}… (its name)"),
            found: sha256,
        });
    }
    Ok(())
}

/// A demucs bag (`remote/NAME.yaml`).
#[derive(Debug, Clone, PartialEq)]
pub struct BagYaml {
    /// The models' signatures, in order.
    pub models: Vec<String>,
    /// Row `m` weighs model `m`'s stems.
    pub weights: Option<Vec<Vec<f32>>>,
    /// The segment length in seconds demucs applies the bag with (the converted graph keeps
    /// its checkpoints' own).
    pub segment: Option<f64>,
}

/// Reads a demucs bag (demucs' `remote/NAME.yaml`): `models` (signatures), optional
/// `weights` (a row of numbers per model) and `segment` (seconds).
pub fn parse_bag_yaml(text: &str) -> Result<BagYaml, String> {
    let Value::Object(bag) = read_yaml(text)? else {
        return Err("not a mapping of `models:`, `weights:`, `segment:`".into());
    };
    let number = |value: &Value, what: &str| {
        value
            .as_f64()
            .ok_or_else(|| format!("{what} `{value}` is not a number"))
    };
    let models = match bag.get("models") {
        Some(Value::Array(items)) if !items.is_empty() => items
            .iter()
            .map(|item| match item {
                Value::String(s) if !s.is_empty() => Ok(s.clone()),
                Value::Number(n) => Ok(n.to_string()),
                _ => Err("`models` must list signatures".to_owned()),
            })
            .collect::<Result<Vec<_>, _>>()?,
        _ => return Err("no `models:` list".into()),
    };
    let weights = match bag.get("weights") {
        None | Some(Value::Null) => None,
        Some(Value::Array(rows)) => Some(
            rows.iter()
                .map(|row| match row {
                    Value::Array(cells) => cells
                        .iter()
                        .map(|cell| number(cell, "weight").map(|w| w as f32))
                        .collect::<Result<Vec<f32>, _>>(),
                    _ => Err("`weights` must be a list of lists".to_owned()),
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(_) => return Err("`weights` must be a list of lists".into()),
    };
    if let Some(rows) = &weights {
        if rows.len() != models.len() {
            return Err(format!(
                "{} rows of weights for {} models",
                rows.len(),
                models.len()
            ));
        }
    }
    let segment = match bag.get("segment") {
        None | Some(Value::Null) => None,
        Some(value) => Some(number(value, "segment")?),
    };
    Ok(BagYaml {
        models,
        weights,
        segment,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demucs_bags_are_read_inline_multiline_and_as_blocks() {
        // demucs/remote/htdemucs_ft.yaml.
        let ft = parse_bag_yaml(
            "models: ['f7e0c4bc', 'd12395a8', '92cfc3b6', '04573f0d']\nweights: [\n    [1., 0., \
             0., 0.],\n    [0., 1., 0., 0.],\n    [0., 0., 1., 0.],\n    [0., 0., 0., 1.],\n]\n\
             segment: 7.8  # seconds\n",
        )
        .unwrap();
        assert_eq!(ft.models, ["f7e0c4bc", "d12395a8", "92cfc3b6", "04573f0d"]);
        let weights = ft.weights.unwrap();
        assert_eq!(weights.len(), 4);
        assert_eq!(weights[2], [0.0, 0.0, 1.0, 0.0]);
        assert_eq!(ft.segment, Some(7.8));
        let block = parse_bag_yaml("models:\n  - 955717e8\n  - \"abcd1234\"\n").unwrap();
        assert_eq!(block.models, ["955717e8", "abcd1234"]);
        assert_eq!(block.weights, None);
        assert!(parse_bag_yaml("audio:\n  chunk_size: 485100\n").is_err());
        assert!(parse_bag_yaml("models: [a, b]\nweights: [[1, 0]]\n").is_err());
        assert!(parse_bag_yaml("models: [a\n").is_err());
    }

    #[test]
    fn names_are_plain_file_names() {
        let file = Path::new("/x/My Model.onnx");
        assert_eq!(model_name(file, None).unwrap(), "My Model");
        assert_eq!(model_name(file, Some(" ft ")).unwrap(), "ft");
        for bad in ["../up", "a/b", ".hidden", ""] {
            assert!(model_name(file, Some(bad)).is_err(), "{bad}");
        }
    }
}
