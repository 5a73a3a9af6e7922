//! `stemflow separate`: decode, separate and write each input in turn, streaming all the way.
//!
//! Where a run starts: `args.rs` (the arguments, made [`SeparateOptions`] in `options.rs`) and
//! [`manifest`] (the `stemflow-manifest` crate: catalogue input, `--manifest`, `--shard`,
//! standard input). `jobs.rs` then takes each job through one stage per file, in the order a
//! file is separated:
//!
//! 1. `destination.rs`: its stem folder, refused if a stem would overwrite an input or another
//!    job's stems;
//! 2. `claim.rs`: one worker at a time on that folder, when several are handed one input;
//! 3. `record.rs`: skipped when a record says it is done (a resumable catalogue run);
//! 4. `decode_ahead.rs`: its input decoded on its own thread (the next one started early);
//! 5. `slot.rs`: the separator, built once per run and handed from input to input;
//! 6. `file.rs`: the input through the separator into its stem files (`stem_files.rs`), with
//!    nothing half-done left behind (`new_folder.rs`);
//! 7. `record.rs`: the record written after the stems; `report.rs`: its `--json` result line.

pub mod args;
mod claim;
mod decode_ahead;
mod destination;
mod file;
mod jobs;
mod new_folder;
mod options;
mod record;
mod report;
mod slot;
mod stem_files;

use std::path::{Path, PathBuf};

// The manifest reader, at the path the other files name it by (`super::manifest::…`).
pub use stemflow_manifest as manifest;

use crate::error::CliError;
use args::{JobSource, SeparateArgs};
pub(crate) use decode_ahead::DECODE_THREAD_NAME;
use jobs::Run;
use manifest::{BadLine, Job};
pub use options::{Catalogue, Failure, SeparateOptions};

/// Runs `stemflow separate`.
pub fn run(args: SeparateArgs) -> Result<(), CliError> {
    crate::devices::no_tf32_flag(args.no_tf32);
    let (source, output, options, catalogue) = args.into_options()?;
    let result = match source {
        JobSource::Paths(inputs) => separate_paths(&inputs, &output, &options, catalogue),
        JobSource::Manifest(path) => {
            let jobs = manifest::read_manifest(&path).map_err(CliError::Failed)?;
            let inputs: Vec<PathBuf> = jobs
                .iter()
                .filter_map(|job| job.as_ref().ok().map(|job| job.input.clone()))
                .collect();
            separate_jobs(jobs.into_iter(), &inputs, &output, &options, catalogue)
        }
        JobSource::Stdin => {
            separate_jobs(manifest::stdin_jobs(), &[], &output, &options, catalogue)
        }
    };
    match result {
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
    separate_paths(inputs, output, options, Catalogue::default())
}

/// [`separate_all`] with the catalogue options the command line gave (`--json` result lines,
/// `--shard`), which apply to inputs named on the command line as to a manifest's.
fn separate_paths(
    inputs: &[PathBuf],
    output: &Path,
    options: &SeparateOptions,
    catalogue: Catalogue,
) -> Result<usize, Failure> {
    separate_jobs(
        inputs.iter().map(|p| Ok(Job::from_path(p))),
        inputs,
        output,
        options,
        catalogue,
    )
}

/// Separates each job into `output/<name>/` (see [`jobs`]'s stages). No stem is written over any
/// of `known_inputs` (every input, when they are known before the first job) or over an input of
/// an earlier job. Returns the number of failed jobs.
pub fn separate_jobs(
    jobs: impl Iterator<Item = Result<Job, BadLine>>,
    known_inputs: &[PathBuf],
    output: &Path,
    options: &SeparateOptions,
    catalogue: Catalogue,
) -> Result<usize, Failure> {
    Run::new(output, options, catalogue, known_inputs).separate_jobs(jobs)
}
