//! The first stage of a job: its stem folder, and the refusals that keep a run from writing
//! over one of its own inputs (under any name or link) or over the stems of an earlier job.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::manifest::Job;
use super::options::SeparateOptions;

/// The folders and inputs a run has seen so far.
pub(super) struct Destinations {
    /// Output folders used by a job of this run, and that job's input.
    folders: HashMap<PathBuf, PathBuf>,
    /// Every input so far, by file identity: no stem may be written over one (whatever its
    /// name). A manifest file's inputs are all known before the first job; standard input's
    /// arrive one by one.
    input_ids: HashMap<FileId, PathBuf>,
}

impl Destinations {
    /// A run whose inputs include `known_inputs` (all of them when they are known before the
    /// first job).
    pub(super) fn new(known_inputs: &[PathBuf]) -> Self {
        Self {
            folders: HashMap::new(),
            input_ids: known_inputs
                .iter()
                .filter_map(|input| FileId::of(input).map(|id| (id, input.clone())))
                .collect(),
        }
    }

    /// `job`'s stem folder in `output`: its name, else its input's file name without the
    /// extension.
    pub(super) fn folder_of(job: &Job, output: &Path) -> PathBuf {
        output.join(job.name.clone().unwrap_or_else(|| input_name(&job.input)))
    }

    /// Takes `folder` for `job` when none of its stems would overwrite an input of the run or
    /// another job's stems; the refusal says which and what to do.
    pub(super) fn take(
        &mut self,
        job: &Job,
        folder: &Path,
        options: &SeparateOptions,
    ) -> Result<(), String> {
        if let Some(id) = FileId::of(&job.input) {
            self.input_ids.insert(id, job.input.clone());
        }
        let overwritten = options.stems.iter().find_map(|&stem| {
            let path = options.stem_path(folder, stem);
            FileId::of(&path)
                .and_then(|id| self.input_ids.get(&id))
                .map(|victim| (path, victim.clone()))
        });
        if let Some((path, victim)) = overwritten {
            return Err(format!(
                "its stem {} would overwrite the input {}; choose another output folder (-o)",
                path.display(),
                victim.display()
            ));
        }
        if let Some(earlier) = self.folders.get(folder) {
            return Err(format!(
                "its stems would overwrite those of {} in {}; rename one of them or separate them in separate runs",
                earlier.display(),
                folder.display()
            ));
        }
        self.folders.insert(folder.to_path_buf(), job.input.clone());
        Ok(())
    }

    /// Gives `folder` back (its job is taken up again later).
    pub(super) fn release(&mut self, folder: &Path) {
        self.folders.remove(folder);
    }
}

/// The folder name for an input: its file name without the extension.
fn input_name(input: &Path) -> String {
    input
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "input".into())
}

/// A file's identity: the same file under any name or link.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct FileId(#[cfg(unix)] (u64, u64), #[cfg(not(unix))] PathBuf);

impl FileId {
    /// The identity of the file at `path`, `None` when there is none.
    fn of(path: &Path) -> Option<Self> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let metadata = std::fs::metadata(path).ok()?;
            Some(FileId((metadata.dev(), metadata.ino())))
        }
        #[cfg(not(unix))]
        {
            std::fs::canonicalize(path).ok().map(FileId)
        }
    }
}
