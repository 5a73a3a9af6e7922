//! `stemflow separate`: decode, separate and write each input in turn, streaming all the way.
//!
//! - `args.rs`: the arguments and how they become [`SeparateOptions`] (`options.rs`);
//! - `slot.rs`: the separator, built once per run and handed from input to input;
//! - `file.rs`: one input, from decoder to finished stem files.

pub mod args;
mod file;
mod new_folder;
mod options;
mod slot;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::decode::io_reason;
use crate::error::CliError;
use args::SeparateArgs;
use file::{separate_file, stem_path};
use new_folder::NewFolderGuard;
pub use options::{Failure, SeparateOptions};
use slot::SeparatorSlot;

/// Runs `stemflow separate`.
pub fn run(args: SeparateArgs) -> Result<(), CliError> {
    let (inputs, output, options) = args.into_options()?;
    match separate_all(&inputs, &output, &options) {
        Ok(0) => Ok(()),
        Ok(_) => Err(CliError::Reported),
        Err(Failure::Interrupted(signal)) => Err(CliError::Interrupted(signal)),
        Err(Failure::Fatal(reason) | Failure::Input(reason)) => Err(CliError::Failed(reason)),
    }
}

/// Separates every input into `output/<input name>/`. Prints one error line per failed input
/// and goes on with the next. Returns the number of failed inputs, or a fatal error.
pub fn separate_all(
    inputs: &[PathBuf],
    output: &Path,
    options: &SeparateOptions,
) -> Result<usize, Failure> {
    // Removed again at the end if this run created it and wrote nothing into it.
    let _output_folder = NewFolderGuard::create(output).map_err(|e| {
        Failure::Fatal(format!(
            "cannot create the output folder {}: {}",
            output.display(),
            io_reason(&e)
        ))
    })?;
    let mut separator = SeparatorSlot::new(options);
    // Output folders already used by an earlier input of this run.
    let mut folders: HashMap<PathBuf, PathBuf> = HashMap::new();
    // Every input, by file identity: no stem may be written over one (whatever its name).
    let input_ids: HashMap<FileId, &PathBuf> = inputs
        .iter()
        .filter_map(|input| FileId::of(input).map(|id| (id, input)))
        .collect();
    let mut num_failed = 0;
    for input in inputs {
        let folder = output.join(input_name(input));
        let overwritten = options.stems.iter().find_map(|&stem| {
            let path = stem_path(&folder, stem, options);
            FileId::of(&path)
                .and_then(|id| input_ids.get(&id))
                .map(|victim| (path, *victim))
        });
        if let Some((path, victim)) = overwritten {
            crate::output::say_err!(
                "stemflow: error: {}: its stem {} would overwrite the input {}; choose another output folder (-o)",
                input.display(),
                path.display(),
                victim.display()
            );
            num_failed += 1;
            continue;
        }
        if let Some(earlier) = folders.get(&folder) {
            crate::output::say_err!(
                "stemflow: error: {}: its stems would overwrite those of {} in {}; rename one of them or separate them in separate runs",
                input.display(),
                earlier.display(),
                folder.display()
            );
            num_failed += 1;
            continue;
        }
        folders.insert(folder.clone(), input.clone());
        match separate_file(input, &folder, options, &mut separator) {
            Ok(separated) => {
                if !options.is_quiet() {
                    crate::output::say!("  → {}", separated.folder.display());
                    for file in &separated.files {
                        crate::output::say!(
                            "    {}",
                            file.file_name().unwrap_or_default().to_string_lossy()
                        );
                    }
                }
            }
            Err(Failure::Input(reason)) => {
                crate::output::say_err!("stemflow: error: {}: {reason}", input.display());
                num_failed += 1;
            }
            Err(failure @ (Failure::Fatal(_) | Failure::Interrupted(_))) => return Err(failure),
        }
    }
    if inputs.len() > 1 && !options.is_quiet() {
        crate::output::say!(
            "{} of {} files separated{}",
            inputs.len() - num_failed,
            inputs.len(),
            if num_failed > 0 {
                format!(", {num_failed} failed")
            } else {
                String::new()
            }
        );
    }
    Ok(num_failed)
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
