//! `stemflow separate`: decode, separate and write each input in turn, streaming all the way.
//!
//! - `args.rs`: the arguments and how they become [`SeparateOptions`] (`options.rs`);
//! - `slot.rs`: the separator, built once per run and handed from input to input;
//! - `file.rs`: one input, from decoder to finished stem files;
//! - `decode_ahead.rs`: each input decoded on its own thread, and the next one started early;
//! - `manifest.rs`: catalogue input (`--manifest`, `--shard`); `record.rs`: the record that
//!   makes a catalogue run resumable; `report.rs`: `--json` result lines;
//! - `claim.rs`: one worker at a time on a stem folder, when several are handed one input.

pub mod args;
mod claim;
mod decode_ahead;
mod file;
pub mod manifest;
mod new_folder;
mod options;
mod record;
mod report;
mod slot;

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};

use std::time::{Duration, Instant};

use crate::decode::io_reason;
use crate::error::CliError;
use args::{JobSource, SeparateArgs};
use claim::{Claim, ClaimOutcome, Holder};
use decode_ahead::PendingDecode;
use file::{separate_file, stem_path};
use manifest::{BadLine, Job};
use new_folder::NewFolderGuard;
pub use options::{Catalogue, Failure, SeparateOptions};
use report::{JobReport, Status};
use slot::SeparatorSlot;

/// Runs `stemflow separate`.
pub fn run(args: SeparateArgs) -> Result<(), CliError> {
    let (source, output, options, catalogue) = args.into_options()?;
    let result = match source {
        JobSource::Paths(inputs) => separate_all(&inputs, &output, &options),
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
    separate_jobs(
        inputs.iter().map(|p| Ok(Job::from_path(p))),
        inputs,
        output,
        options,
        Catalogue::default(),
    )
}

/// Separates each job into `output/<name>/`, in turn, as the jobs arrive; while one separates,
/// the next one's input (a plain file) is opened and decoded ahead, unless the jobs are streamed
/// (standard input: each is answered before the next is read). A job that fails is
/// reported (an error line, and a result line with `--json`) and the next one goes on; a fatal
/// failure (the model, the device) or a signal stops the run. No stem is written over any of
/// `known_inputs` (every input, when they are known before the first job) or over an input of
/// an earlier job. Returns the number of failed jobs.
pub fn separate_jobs(
    jobs: impl Iterator<Item = Result<Job, BadLine>>,
    known_inputs: &[PathBuf],
    output: &Path,
    options: &SeparateOptions,
    catalogue: Catalogue,
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
    // The options with the stems the separator delivers, known once it is built (for the
    // first job that separates: a run whose jobs are all done never loads the model). The
    // checks before it use the stems asked for, which hold those written.
    let mut resolved_options: Option<SeparateOptions> = None;
    // What identifies the separator's output, for records; computed on first need.
    let mut identity: Option<String> = None;
    // Output folders already used by an earlier input of this run.
    let mut folders: HashMap<PathBuf, PathBuf> = HashMap::new();
    // Every input so far, by file identity: no stem may be written over one (whatever its
    // name). A manifest file's inputs are all known before the first job; standard input's
    // arrive one by one.
    let jobs: Box<dyn Iterator<Item = Result<Job, BadLine>>> = match catalogue.shard {
        Some(shard) => Box::new(jobs.filter(move |job| match job {
            Ok(job) => shard.contains(&job.given),
            Err(bad) => shard.contains(&bad.given),
        })),
        None => Box::new(jobs),
    };
    let mut jobs = jobs.peekable();
    // The next job's input, decoding ahead while the current one separates.
    let mut decoding_ahead: Option<PendingDecode> = None;
    let mut input_ids: HashMap<FileId, PathBuf> = known_inputs
        .iter()
        .filter_map(|input| FileId::of(input).map(|id| (id, input.clone())))
        .collect();
    let mut num_jobs = 0;
    let mut num_failed = 0;
    // Jobs whose folder another worker held when they came up: taken up again after the
    // others, waiting for that worker if it is still at it.
    let mut deferred: VecDeque<Job> = VecDeque::new();
    loop {
        let (job, is_deferred) = match jobs.next() {
            Some(job) => (job, false),
            None => match deferred.pop_front() {
                Some(job) => (Ok(job), true),
                None => break,
            },
        };
        if !is_deferred {
            num_jobs += 1;
        }
        let started = Instant::now();
        let job = match job {
            Ok(job) => job,
            Err(bad) => {
                crate::output::say_err!("stemflow: error: {}", bad.reason);
                report::print(catalogue, &JobReport::failed(&bad.given, None, bad.reason));
                num_failed += 1;
                continue;
            }
        };
        if let Some(id) = FileId::of(&job.input) {
            input_ids.insert(id, job.input.clone());
        }
        let input = &job.input;
        let folder = output.join(job.name.clone().unwrap_or_else(|| input_name(input)));
        let mut fail = |reason: String| {
            crate::output::say_err!("stemflow: error: {}: {reason}", input.display());
            report::print(
                catalogue,
                &JobReport::failed(&job.given, Some(&folder), reason),
            );
            num_failed += 1;
        };
        let overwritten = options.stems.iter().find_map(|&stem| {
            let path = stem_path(&folder, stem, options);
            FileId::of(&path)
                .and_then(|id| input_ids.get(&id))
                .map(|victim| (path, victim.clone()))
        });
        if let Some((path, victim)) = overwritten {
            fail(format!(
                "its stem {} would overwrite the input {}; choose another output folder (-o)",
                path.display(),
                victim.display()
            ));
            continue;
        }
        if let Some(earlier) = folders.get(&folder) {
            let earlier = earlier.clone();
            fail(format!(
                "its stems would overwrite those of {} in {}; rename one of them or separate them in separate runs",
                earlier.display(),
                folder.display()
            ));
            continue;
        }
        folders.insert(folder.clone(), input.clone());
        // One worker at a time on a folder: another worker handed the same input (a retried
        // pod, a second run of the same command) is waited for, or its input taken up after
        // the others. The claim goes when this job ends, however it ends.
        let may_defer = !is_deferred && !catalogue.is_streamed;
        let (_claim, waited_for) = match claim_folder(&folder, input, may_defer) {
            Ok(Some(claimed)) => claimed,
            Ok(None) => {
                folders.remove(&folder);
                decoding_ahead = None;
                deferred.push_back(job);
                continue;
            }
            Err(Failure::Input(reason)) => {
                fail(reason);
                continue;
            }
            Err(failure) => return Err(failure),
        };
        // Separated by the worker this one waited for (a record says so when resumable).
        if let (Some(other), false) = (&waited_for, catalogue.is_resumable) {
            if let Some(files) = stems_written_since(&folder, options, other) {
                crate::output::say_err!(
                    "stemflow: {}: separated by the other worker meanwhile; skipped",
                    input.display()
                );
                let mut report = JobReport::new(&job.given, Status::Skipped, &folder);
                report.outputs = files;
                report.seconds = started.elapsed().as_secs_f64();
                report::print(catalogue, &report);
                continue;
            }
        }
        let key = if catalogue.is_resumable {
            let identity = match &identity {
                Some(identity) => identity.clone(),
                None => {
                    let computed = record::model_identity(&options.model)
                        .map_err(|e| Failure::Fatal(format!("the model: {e}")))?;
                    identity.insert(computed).clone()
                }
            };
            match record::file_sha256(input) {
                Ok(input_sha256) => Some(record::record_key(&input_sha256, &identity, options)),
                Err(reason) => {
                    fail(reason);
                    continue;
                }
            }
        } else {
            None
        };
        if let Some(files) = key
            .as_ref()
            .and_then(|key| record::done_files(&folder, key))
        {
            if !options.is_quiet() {
                crate::output::say!(
                    "{}: already separated in {}",
                    input.display(),
                    folder.display()
                );
            }
            let mut report = JobReport::new(&job.given, Status::Skipped, &folder);
            report.outputs = files;
            report.seconds = started.elapsed().as_secs_f64();
            report::print(catalogue, &report);
            continue;
        }
        let pending = match decoding_ahead.take() {
            Some(pending) if pending.path() == input.as_path() => pending,
            _ => PendingDecode::start(input),
        };
        if !catalogue.is_streamed {
            if let Some(Ok(next)) = jobs.peek() {
                // Only a plain file: opening a pipe early would take its audio from a job that
                // may never run (skipped as already done, or refused).
                if std::fs::metadata(&next.input).is_ok_and(|m| m.is_file()) {
                    decoding_ahead = Some(PendingDecode::start(&next.input));
                }
            }
        }
        if resolved_options.is_none() {
            match separator.resolve_stems() {
                Ok(resolved) => resolved_options = Some(resolved),
                Err(failure) => {
                    if let Failure::Fatal(reason) = &failure {
                        report::print(
                            catalogue,
                            &JobReport::failed(&job.given, Some(&folder), reason.clone()),
                        );
                    }
                    return Err(failure);
                }
            }
        }
        let run_options = resolved_options.as_ref().expect("resolved above");
        match separate_file(pending, &folder, run_options, &mut separator) {
            Ok(separated) => {
                if let Some(key) = key {
                    if let Err(reason) = record::write_record(
                        &folder,
                        key,
                        &job.given,
                        &separated.files,
                        separated.audio_s,
                        separated.elapsed_s,
                    ) {
                        fail(reason);
                        continue;
                    }
                }
                if !options.is_quiet() {
                    crate::output::say!("  → {}", separated.folder.display());
                    for file in &separated.files {
                        crate::output::say!(
                            "    {}",
                            file.file_name().unwrap_or_default().to_string_lossy()
                        );
                    }
                }
                let mut report = JobReport::new(&job.given, Status::Separated, &folder);
                report.seconds = started.elapsed().as_secs_f64();
                report.audio_seconds = Some(separated.audio_s);
                report.outputs = separated.files;
                report::print(catalogue, &report);
            }
            Err(Failure::Input(reason)) => fail(reason),
            Err(failure @ (Failure::Fatal(_) | Failure::Interrupted(_))) => {
                if let Failure::Fatal(reason) = &failure {
                    report::print(
                        catalogue,
                        &JobReport::failed(&job.given, Some(&folder), reason.clone()),
                    );
                }
                return Err(failure);
            }
        }
        // A standard-input worker answers each line before it reads the next.
        crate::output::flush();
    }
    if num_jobs > 1 && !options.is_quiet() {
        crate::output::say!(
            "{} of {} files separated{}",
            num_jobs - num_failed,
            num_jobs,
            if num_failed > 0 {
                format!(", {num_failed} failed")
            } else {
                String::new()
            }
        );
    }
    Ok(num_failed)
}

/// Claims `folder` for `input`'s job (see `claim.rs`). When another worker holds it: `None`
/// when `may_defer` (the caller takes the job up later), otherwise waits for it, saying so once.
/// Returns the claim and the worker waited for, if any.
fn claim_folder(
    folder: &Path,
    input: &Path,
    may_defer: bool,
) -> Result<Option<(Claim, Option<Holder>)>, Failure> {
    let mut waited_for: Option<Holder> = None;
    let mut has_said = false;
    loop {
        let outcome = Claim::take(folder).map_err(|e| {
            Failure::Input(format!(
                "cannot claim {}: {}",
                folder.display(),
                io_reason(&e)
            ))
        })?;
        let holder = match outcome {
            ClaimOutcome::Taken(claim) => return Ok(Some((claim, waited_for))),
            ClaimOutcome::Held(holder) => holder,
        };
        let who = holder.as_ref().map_or_else(
            || "another worker".to_owned(),
            |h| format!("another worker ({})", h.describe()),
        );
        if may_defer {
            crate::output::say_err!(
                "stemflow: {}: {} is being separated by {who}; back to it after the other inputs",
                input.display(),
                folder.display()
            );
            return Ok(None);
        }
        if !has_said {
            crate::output::say_err!(
                "stemflow: {}: waiting for {who}, which is separating it into {}",
                input.display(),
                folder.display()
            );
            has_said = true;
        }
        waited_for = holder.or(waited_for);
        if let Some(signal) = crate::interrupt::received() {
            return Err(Failure::Interrupted(signal));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The stem files of `options` in `folder`, when every one is there and was written after
/// `other` claimed the folder: that worker separated it.
fn stems_written_since(
    folder: &Path,
    options: &SeparateOptions,
    other: &Holder,
) -> Option<Vec<PathBuf>> {
    let since = std::time::UNIX_EPOCH + Duration::from_secs(other.since_unix_s);
    options
        .stems
        .iter()
        .map(|&stem| {
            let path = stem_path(folder, stem, options);
            let modified = std::fs::metadata(&path).ok()?.modified().ok()?;
            (modified >= since).then_some(path)
        })
        .collect()
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
