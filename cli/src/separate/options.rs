//! [`SeparateOptions`]: how to separate; [`Catalogue`]: how a run treats its jobs; [`Failure`]:
//! why an input failed; [`Separated`]: what it produced.

use std::path::{Path, PathBuf};

use stemflow_engine::runtime::DeviceChoice;
use stemflow_engine::whole_file::{
    OtherStem, SeparationMode, WholeFileOptions, WholeFileSeparator,
};
use stemflow_engine::{EngineError, LookAhead, Stem};

use super::manifest::Shard;
use crate::encode::{BitDepth, OutputFormat};
use crate::model_spec::ModelSpec;
use crate::progress::ProgressMode;

/// How to separate.
#[derive(Clone)]
pub struct SeparateOptions {
    /// The model (or `builtin`), or an ensemble of several.
    pub model: ModelSpec,
    /// Where models run.
    pub device: DeviceChoice,
    /// With the reference's whole-file edges or the stream's (the plugin's).
    pub mode: SeparationMode,
    /// What `Other` is.
    pub other: OtherStem,
    /// How far past the audio a model may look (the stream's; `Full` for whole files).
    pub look_ahead: LookAhead,
    /// Fail instead of falling back to the CPU.
    pub is_strict_device: bool,
    /// The stems to write, in [`Stem::OUTPUT_ORDER`]; until
    /// [`SeparateOptions::for_model`], those the user asked for.
    pub stems: Vec<Stem>,
    /// Whether the user named the stems (`--stems`): the model must deliver each of them.
    /// Otherwise they are the default set, of which a model writes those it delivers (a
    /// two-stem model: vocals and other, no silent drums and bass).
    pub are_stems_named: bool,
    /// Where a six-stem model's guitar and piano go.
    pub extra_stems: stemflow_engine::ExtraStems,
    /// Container of the stem files.
    pub format: OutputFormat,
    /// Sample format of the stem files; `None`: [`BitDepth::default_for`] the input.
    pub bit_depth: Option<BitDepth>,
    /// Progress display.
    pub progress: ProgressMode,
}

impl SeparateOptions {
    pub(crate) fn is_quiet(&self) -> bool {
        self.progress == ProgressMode::Quiet
    }

    /// How a single model separates a file.
    pub fn file_options(&self) -> WholeFileOptions {
        WholeFileOptions {
            device: self.device,
            mode: self.mode,
            other: self.other,
            extra_stems: self.extra_stems,
            batch_chunks: None,
        }
    }

    /// Where `stem`'s file goes in `folder`.
    pub fn stem_path(&self, folder: &Path, stem: Stem) -> PathBuf {
        folder.join(format!("{}.{}", stem.file_name(), self.format.extension()))
    }

    /// These options with the stems `model` delivers: the named stems, each of which it
    /// must deliver (the error says what it delivers), or those of the default set it
    /// delivers. `Other` is always delivered.
    pub fn for_model(&self, model: &WholeFileSeparator) -> Result<Self, String> {
        let delivered: Vec<Stem> = self
            .stems
            .iter()
            .copied()
            .filter(|&stem| model.delivers_stem(stem))
            .collect();
        if self.are_stems_named {
            if let Some(missing) = self.stems.iter().find(|s| !delivered.contains(s)) {
                let separated: Vec<&str> = Stem::OUTPUT_ORDER
                    .into_iter()
                    .filter(|&stem| stem != Stem::Other && model.delivers_stem(stem))
                    .map(Stem::file_name)
                    .collect();
                return Err(format!(
                    "{} has no {} stem: it separates {}, and other holds the rest; leave {} out of --stems",
                    model.name(),
                    missing.file_name(),
                    if separated.is_empty() {
                        "nothing".to_owned()
                    } else {
                        separated.join(", ")
                    },
                    missing.file_name()
                ));
            }
        }
        Ok(Self {
            stems: delivered,
            ..self.clone()
        })
    }
}

/// Why an input failed.
pub enum Failure {
    /// Something about this input (unreadable, unsupported, unwritable): report it and go on.
    Input(String),
    /// Something that would fail every input the same way (the model, the device): stop.
    Fatal(String),
    /// SIGINT or SIGTERM arrived: stop, leaving nothing unfinished behind.
    Interrupted(i32),
}

impl From<EngineError> for Failure {
    fn from(error: EngineError) -> Self {
        match error {
            // The model: every input would fail the same way.
            EngineError::Model(error) => Failure::Fatal(error.to_string()),
            error => Failure::Input(error.to_string()),
        }
    }
}

/// What one separated input produced.
pub struct Separated {
    /// The stem files written.
    pub files: Vec<PathBuf>,
    /// The folder they are in.
    pub folder: PathBuf,
    /// Seconds of audio separated.
    pub audio_s: f64,
    /// Seconds it took.
    pub elapsed_s: f64,
}

/// How a run treats its jobs beyond separating them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Catalogue {
    /// Only the jobs of this shard.
    pub shard: Option<Shard>,
    /// Skip a job whose folder holds a matching record; write one after each job.
    pub is_resumable: bool,
    /// One JSON result line per job on standard output (and nothing else there).
    pub is_json: bool,
    /// The jobs arrive one by one (standard input): each is answered before the next is read,
    /// so none is decoded ahead.
    pub is_streamed: bool,
}
