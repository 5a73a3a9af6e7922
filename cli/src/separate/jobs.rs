//! The run: jobs taken in turn, each through the stages in the order a file is separated —
//! its folder ([`destination`](super::destination)), the claim on it ([`claim`](super::claim)),
//! whether a record says it is done ([`record`](super::record)), its input decoding ahead
//! ([`decode_ahead`](super::decode_ahead)), the separator ([`slot`](super::slot)), the
//! separation into its stem files ([`file`](super::file)), its record, and its result line
//! ([`report`](super::report)).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::claim::{claim_folder, stems_written_since};
use super::decode_ahead::PendingDecode;
use super::destination::Destinations;
use super::file::separate_file;
use super::manifest::{BadLine, Job};
use super::new_folder::NewFolderGuard;
use super::options::{Catalogue, Failure, SeparateOptions, Separated};
use super::record::{done_files, write_record, Resume};
use super::report::{self, JobReport, Status};
use super::slot::SeparatorSlot;
use crate::decode::io_reason;

/// How one job ended, for the run's count.
enum Ended {
    /// Separated, or skipped as done.
    Done,
    /// Reported as failed; the run goes on.
    Failed,
    /// Another worker holds its folder: taken up again after the other jobs.
    Deferred(Job),
}

/// A job that passed the checks, with its folder.
struct Placed<'j> {
    job: &'j Job,
    folder: PathBuf,
    started: Instant,
}

/// One run of `stemflow separate` over its jobs.
pub(super) struct Run<'a> {
    output: &'a Path,
    options: &'a SeparateOptions,
    catalogue: Catalogue,
    separator: SeparatorSlot<'a>,
    /// The options with the stems the separator delivers, known once it is built (for the
    /// first job that separates: a run whose jobs are all done never loads the model). The
    /// checks before it use the stems asked for, which hold those written.
    resolved_options: Option<SeparateOptions>,
    destinations: Destinations,
    resume: Resume,
    /// The next job's input, decoding ahead while the current one separates.
    decoding_ahead: Option<PendingDecode>,
}

impl<'a> Run<'a> {
    /// A run writing into `output`; no stem is written over any of `known_inputs` (every input,
    /// when they are known before the first job) or over an input of an earlier job.
    pub(super) fn new(
        output: &'a Path,
        options: &'a SeparateOptions,
        catalogue: Catalogue,
        known_inputs: &[PathBuf],
    ) -> Self {
        Self {
            output,
            options,
            catalogue,
            separator: SeparatorSlot::new(options),
            resolved_options: None,
            destinations: Destinations::new(known_inputs),
            resume: Resume::default(),
            decoding_ahead: None,
        }
    }

    /// Separates each job into `output/<name>/`, in turn, as the jobs arrive; while one
    /// separates, the next one's input (a plain file) is opened and decoded ahead, unless the
    /// jobs are streamed (standard input: each is answered before the next is read). A job that
    /// fails is reported (an error line, and a result line with `--json`) and the next one goes
    /// on; a fatal failure (the model, the device) or a signal stops the run. Returns the
    /// number of failed jobs.
    pub(super) fn separate_jobs(
        mut self,
        jobs: impl Iterator<Item = Result<Job, BadLine>>,
    ) -> Result<usize, Failure> {
        // Removed again at the end if this run created it and wrote nothing into it.
        let _output_folder = NewFolderGuard::create(self.output).map_err(|e| {
            Failure::Fatal(format!(
                "cannot create the output folder {}: {}",
                self.output.display(),
                io_reason(&e)
            ))
        })?;
        let jobs: Box<dyn Iterator<Item = Result<Job, BadLine>>> = match self.catalogue.shard {
            Some(shard) => Box::new(jobs.filter(move |job| match job {
                Ok(job) => shard.contains(&job.given),
                Err(bad) => shard.contains(&bad.given),
            })),
            None => Box::new(jobs),
        };
        let mut jobs = jobs.peekable();
        // Jobs whose folder another worker held when they came up: taken up again after the
        // others, waiting for that worker if it is still at it.
        let mut deferred: VecDeque<Job> = VecDeque::new();
        let (mut num_jobs, mut num_failed) = (0, 0);
        loop {
            let (job, is_deferred) = match jobs.next() {
                Some(job) => (job, false),
                None => match deferred.pop_front() {
                    Some(job) => (Ok(job), true),
                    None => break,
                },
            };
            num_jobs += usize::from(!is_deferred);
            let job = match job {
                Ok(job) => job,
                Err(bad) => {
                    crate::output::say_err!("stemflow: error: {}", bad.reason);
                    report::print(
                        self.catalogue,
                        &JobReport::failed(&bad.given, None, bad.reason),
                    );
                    num_failed += 1;
                    continue;
                }
            };
            // Never peeked when streamed: that would wait for the next line before this job
            // is answered.
            let next_input = match self.catalogue.is_streamed {
                true => None,
                false => match jobs.peek() {
                    Some(Ok(next)) => Some(next.input.as_path()),
                    _ => None,
                },
            };
            match self.separate_job(job, is_deferred, next_input)? {
                Ended::Done => {}
                Ended::Failed => num_failed += 1,
                Ended::Deferred(job) => deferred.push_back(job),
            }
            // A standard-input worker answers each line before it reads the next.
            crate::output::flush();
        }
        if num_jobs > 1 && !self.options.is_quiet() {
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

    /// One job through every stage; `next_input` starts decoding ahead.
    fn separate_job(
        &mut self,
        job: Job,
        is_deferred: bool,
        next_input: Option<&Path>,
    ) -> Result<Ended, Failure> {
        let placed = Placed {
            folder: Destinations::folder_of(&job, self.output),
            started: Instant::now(),
            job: &job,
        };
        if let Err(reason) = self.destinations.take(&job, &placed.folder, self.options) {
            return Ok(self.fail(&placed, reason));
        }
        // One worker at a time on a folder: another worker handed the same input (a retried
        // pod, a second run of the same command) is waited for, or its input taken up after
        // the others. The claim goes when this job ends, however it ends.
        let may_defer = !is_deferred && !self.catalogue.is_streamed;
        let (_claim, waited_for) = match claim_folder(&placed.folder, &job.input, may_defer) {
            Ok(Some(claimed)) => claimed,
            Ok(None) => {
                self.destinations.release(&placed.folder);
                self.decoding_ahead = None;
                return Ok(Ended::Deferred(job));
            }
            Err(Failure::Input(reason)) => return Ok(self.fail(&placed, reason)),
            Err(failure) => return Err(failure),
        };
        // Separated by the worker this one waited for (a record says so when resumable).
        if let (Some(other), false) = (&waited_for, self.catalogue.is_resumable) {
            if let Some(files) = stems_written_since(&placed.folder, self.options, other) {
                crate::output::say_err!(
                    "stemflow: {}: separated by the other worker meanwhile; skipped",
                    job.input.display()
                );
                return Ok(self.skipped(&placed, files));
            }
        }
        let key = match self.catalogue.is_resumable {
            true => match self.resume.key(&job.input, self.options) {
                Ok(key) => Some(key),
                Err(Failure::Input(reason)) => return Ok(self.fail(&placed, reason)),
                Err(failure) => return Err(failure),
            },
            false => None,
        };
        if let Some(files) = key.as_ref().and_then(|key| done_files(&placed.folder, key)) {
            if !self.options.is_quiet() {
                crate::output::say!(
                    "{}: already separated in {}",
                    job.input.display(),
                    placed.folder.display()
                );
            }
            return Ok(self.skipped(&placed, files));
        }
        let pending = self.start_decoding(&job.input, next_input);
        let separated = match self.separate(pending, &placed) {
            Ok(separated) => separated,
            Err(Failure::Input(reason)) => return Ok(self.fail(&placed, reason)),
            Err(failure) => {
                self.report_fatal(&placed, &failure);
                return Err(failure);
            }
        };
        if let Some(key) = key {
            let written = write_record(
                &placed.folder,
                key,
                &job.given,
                &separated.files,
                separated.audio_s,
                separated.elapsed_s,
            );
            if let Err(reason) = written {
                return Ok(self.fail(&placed, reason));
            }
        }
        Ok(self.separated(&placed, separated))
    }

    /// `input`'s decoding (begun ahead, or started now), and the next plain file's begun.
    fn start_decoding(&mut self, input: &Path, next_input: Option<&Path>) -> PendingDecode {
        let pending = match self.decoding_ahead.take() {
            Some(pending) if pending.path() == input => pending,
            _ => PendingDecode::start(input),
        };
        // Only a plain file: opening a pipe early would take its audio from a job that may
        // never run (skipped as already done, or refused).
        if let Some(next) = next_input.filter(|n| std::fs::metadata(n).is_ok_and(|m| m.is_file())) {
            self.decoding_ahead = Some(PendingDecode::start(next));
        }
        pending
    }

    /// The separator (built on first use) through `pending` into the job's folder.
    fn separate(
        &mut self,
        pending: PendingDecode,
        placed: &Placed<'_>,
    ) -> Result<Separated, Failure> {
        if self.resolved_options.is_none() {
            self.resolved_options = Some(self.separator.resolve_stems()?);
        }
        let options = self.resolved_options.as_ref().expect("resolved above");
        let separator = self.separator.take()?;
        let slot = &mut self.separator;
        let (result, separator) = separate_file(
            pending,
            &placed.folder,
            options,
            separator,
            &mut |latency_s| slot.report_look_ahead(latency_s),
        );
        self.separator.put_back(separator);
        result
    }

    /// Reports a job that failed, and why.
    fn fail(&self, placed: &Placed<'_>, reason: String) -> Ended {
        crate::output::say_err!("stemflow: error: {}: {reason}", placed.job.input.display());
        report::print(
            self.catalogue,
            &JobReport::failed(&placed.job.given, Some(&placed.folder), reason),
        );
        Ended::Failed
    }

    /// Reports the job a fatal failure stopped the run on.
    fn report_fatal(&self, placed: &Placed<'_>, failure: &Failure) {
        if let Failure::Fatal(reason) = failure {
            report::print(
                self.catalogue,
                &JobReport::failed(&placed.job.given, Some(&placed.folder), reason.clone()),
            );
        }
    }

    /// Reports a job found done, with its files.
    fn skipped(&self, placed: &Placed<'_>, files: Vec<PathBuf>) -> Ended {
        let mut report = JobReport::new(&placed.job.given, Status::Skipped, &placed.folder);
        report.outputs = files;
        report.seconds = placed.started.elapsed().as_secs_f64();
        report::print(self.catalogue, &report);
        Ended::Done
    }

    /// Reports a job separated, with its files.
    fn separated(&self, placed: &Placed<'_>, separated: Separated) -> Ended {
        if !self.options.is_quiet() {
            crate::output::say!("  → {}", separated.folder.display());
            for file in &separated.files {
                crate::output::say!(
                    "    {}",
                    file.file_name().unwrap_or_default().to_string_lossy()
                );
            }
        }
        let mut report = JobReport::new(&placed.job.given, Status::Separated, &placed.folder);
        report.seconds = placed.started.elapsed().as_secs_f64();
        report.audio_seconds = Some(separated.audio_s);
        report.outputs = separated.files;
        report::print(self.catalogue, &report);
        Ended::Done
    }
}
