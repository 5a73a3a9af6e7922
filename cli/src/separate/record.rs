//! The record a catalogue run leaves in each stem folder (`stemflow-result.json`): what was
//! separated, by what, with which settings, so a rerun skips what is already done and redoes
//! what changed. It is written last, atomically, after every stem is in place.

use std::path::{Path, PathBuf};

use stemflow_engine::hybrid::{is_route_file, RouteFile, StageSeparator};
use stemflow_engine::{models_dirs, SeparatorChoice};

use stemflow_engine::whole_file::{OtherStem, SeparationMode};

use super::options::{Failure, SeparateOptions};
use crate::encode::BitDepth;
use crate::model_spec::ModelSpec;

/// The record's file name in a stem folder.
pub const RECORD_FILE: &str = "stemflow-result.json";

/// SHA-256 of a file's content, lower-case hex. Not realtime-safe.
fn file_sha256(path: &Path) -> Result<String, String> {
    stemflow_fetch::files::file_sha256(path).map_err(|e| e.to_string())
}

/// The record keys of a resumable run: the separator's identity is computed once, on first
/// need (a run whose jobs are all skipped still reads the model once).
#[derive(Default)]
pub(super) struct Resume {
    identity: Option<String>,
}

impl Resume {
    /// The key `input`'s record must match. The separator's identity failing is fatal (it
    /// would fail every job); the input's hash failing is this job's.
    pub(super) fn key(
        &mut self,
        input: &Path,
        options: &SeparateOptions,
    ) -> Result<serde_json::Value, Failure> {
        let identity = match &self.identity {
            Some(identity) => identity,
            None => {
                let computed = model_identity(&options.model)
                    .map_err(|e| Failure::Fatal(format!("the model: {e}")))?;
                self.identity.insert(computed)
            }
        };
        let input_sha256 = file_sha256(input).map_err(Failure::Input)?;
        Ok(record_key(&input_sha256, identity, options))
    }
}

/// What makes a separator's output what it is: `builtin` with Stemflow's version, a model's
/// content hash, or a route's hash with each stage's. Not realtime-safe: reads the model files.
fn separator_identity(choice: &SeparatorChoice) -> Result<String, String> {
    match choice {
        SeparatorChoice::Builtin => Ok("builtin".into()),
        SeparatorChoice::Model(path) if is_route_file(path) => {
            let route = RouteFile::read(path, &models_dirs(&[])).map_err(|e| e.to_string())?;
            let mut identity = format!("route:{}", file_sha256(path)?);
            for stage in &route.stages {
                for choice in stage.separator.choices() {
                    identity.push_str(&format!(" + {}", separator_identity(choice)?));
                }
                if let StageSeparator::Ensemble(spec) = &stage.separator {
                    identity.push_str(&format!(" ({})", spec.method));
                }
            }
            Ok(identity)
        }
        SeparatorChoice::Model(path) => Ok(format!("model:{}", file_sha256(path)?)),
    }
}

/// [`separator_identity`] of one model, or of an ensemble's members with its method.
fn model_identity(model: &ModelSpec) -> Result<String, String> {
    match model {
        ModelSpec::One(choice) => separator_identity(choice),
        ModelSpec::Ensemble(spec) => {
            let members = spec
                .members
                .iter()
                .map(separator_identity)
                .collect::<Result<Vec<_>, _>>()?;
            Ok(format!(
                "ensemble:{} ({})",
                members.join(" + "),
                spec.method
            ))
        }
    }
}

/// The key a record must match for its folder to count as done: Stemflow's version, the input's
/// content, the separator's identity and every setting that changes the files.
fn record_key(
    input_sha256: &str,
    separator_identity: &str,
    options: &SeparateOptions,
) -> serde_json::Value {
    serde_json::json!({
        "stemflow": env!("CARGO_PKG_VERSION"),
        "input_sha256": input_sha256,
        "separator": separator_identity,
        "stems": options.stems.iter().map(|s| s.file_name()).collect::<Vec<_>>(),
        "guitar_piano": format!("{:?}", options.extra_stems),
        "format": options.format.extension(),
        "bit_depth": options.bit_depth.map(BitDepth::describe),
        // Records written before hold this key: its spelling stays.
        "lookahead": options.look_ahead.label(),
        "mode": match options.mode {
            SeparationMode::WholeFile => "file",
            SeparationMode::Stream(_) => "stream",
        },
        "other": match options.other {
            OtherStem::Residual => "residual",
            OtherStem::Model => "model",
        },
    })
}

/// The stem files a matching record in `folder` lists, when they are all there: the folder is
/// done. `None` when there is no record, it does not match `key`, or a file is missing.
pub fn done_files(folder: &Path, key: &serde_json::Value) -> Option<Vec<PathBuf>> {
    let text = std::fs::read_to_string(folder.join(RECORD_FILE)).ok()?;
    let record: serde_json::Value = serde_json::from_str(&text).ok()?;
    if record.get("key")? != key {
        return None;
    }
    let files: Vec<PathBuf> = record
        .get("outputs")?
        .as_array()?
        .iter()
        .map(|name| name.as_str().map(|n| folder.join(n)))
        .collect::<Option<_>>()?;
    files.iter().all(|f| f.is_file()).then_some(files)
}

/// Writes the record after the stems: under a temporary name, then renamed, so a reader never
/// sees half of one. Not realtime-safe.
pub fn write_record(
    folder: &Path,
    key: serde_json::Value,
    input: &str,
    files: &[PathBuf],
    audio_s: f64,
    elapsed_s: f64,
) -> Result<(), String> {
    let record = serde_json::json!({
        "key": key,
        "input": input,
        "outputs": files
            .iter()
            .map(|f| f.file_name().unwrap_or_default().to_string_lossy().into_owned())
            .collect::<Vec<_>>(),
        "audio_seconds": audio_s,
        "seconds": elapsed_s,
    });
    let path = folder.join(RECORD_FILE);
    let temporary = folder.join(format!(".{RECORD_FILE}.{}.partial", std::process::id()));
    let text = serde_json::to_string_pretty(&record).map_err(|e| e.to_string())?;
    std::fs::write(&temporary, text + "\n")
        .and_then(|()| std::fs::rename(&temporary, &path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&temporary);
            format!("cannot write {}: {e}", path.display())
        })
}
