//! `--json`: one result line per job on standard output, written as soon as the job ends.

use std::path::{Path, PathBuf};

use super::options::Catalogue;

/// How a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Its stems were written.
    Separated,
    /// A matching record says it was done before; nothing was written.
    Skipped,
    /// It failed; `error` says why.
    Failed,
}

impl Status {
    fn name(self) -> &'static str {
        match self {
            Status::Separated => "separated",
            Status::Skipped => "skipped",
            Status::Failed => "failed",
        }
    }
}

/// One job's result.
#[derive(Debug, Clone)]
pub struct JobReport {
    /// The input as the manifest or command line wrote it.
    pub input: String,
    /// How it ended.
    pub status: Status,
    /// Its stem folder, when it got that far.
    pub folder: Option<PathBuf>,
    /// Its stem files (separated or found done).
    pub outputs: Vec<PathBuf>,
    /// Wall-clock seconds spent on it.
    pub seconds: f64,
    /// Seconds of audio separated.
    pub audio_seconds: Option<f64>,
    /// Why it failed.
    pub error: Option<String>,
}

impl JobReport {
    /// A report for `input` ending with `status` in `folder`.
    pub fn new(input: &str, status: Status, folder: &Path) -> Self {
        JobReport {
            input: input.to_owned(),
            status,
            folder: Some(folder.to_path_buf()),
            outputs: Vec::new(),
            seconds: 0.0,
            audio_seconds: None,
            error: None,
        }
    }

    /// A failure.
    pub fn failed(input: &str, folder: Option<&Path>, error: String) -> Self {
        JobReport {
            input: input.to_owned(),
            status: Status::Failed,
            folder: folder.map(Path::to_path_buf),
            outputs: Vec::new(),
            seconds: 0.0,
            audio_seconds: None,
            error: Some(error),
        }
    }

    /// The JSON object of a result line.
    pub fn to_json(&self) -> serde_json::Value {
        let real_time_factor = self
            .audio_seconds
            .filter(|&a| a > 0.0)
            .map(|a| self.seconds / a);
        serde_json::json!({
            "input": self.input,
            "status": self.status.name(),
            "folder": self.folder.as_ref().map(|f| f.display().to_string()),
            "outputs": self.outputs.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
            "seconds": self.seconds,
            "audio_seconds": self.audio_seconds,
            "real_time_factor": real_time_factor,
            "error": self.error,
        })
    }
}

/// Prints `report` as one line when the run asked for `--json`, and flushes it.
pub fn print(catalogue: Catalogue, report: &JobReport) {
    if catalogue.is_json {
        crate::output::say!("{}", report.to_json());
        crate::output::flush();
    }
}
