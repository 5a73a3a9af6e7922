//! `stemflow separate`: decode, separate and write each input in turn, streaming all the way.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use stemflow_engine::offline::{OfflineStream, StemFrames};
use stemflow_engine::runtime::devices::{DeviceChoice, DeviceId};
use stemflow_engine::separator::{Separator, SeparatorChoice};
use stemflow_engine::{EngineError, Stem};

use crate::decode::{io_reason, AudioDecoder};
use crate::encode::{BitDepth, OutputFormat, StemWriter};
use crate::progress::{clock, Progress, ProgressMode};

/// How to separate.
pub struct SeparateOptions {
    /// The model (or `builtin`).
    pub separator: SeparatorChoice,
    /// Where models run.
    pub device: DeviceChoice,
    /// Fail instead of falling back to the CPU.
    pub is_strict_device: bool,
    /// The stems to write, in [`Stem::OUTPUT_ORDER`].
    pub stems: Vec<Stem>,
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
    fn is_quiet(&self) -> bool {
        self.progress == ProgressMode::Quiet
    }
}

/// Why an input failed.
pub enum Failure {
    /// Something about this input (unreadable, unsupported, unwritable): report it and go on.
    Input(String),
    /// Something that would fail every input the same way (the model, the device): stop.
    Fatal(String),
}

impl From<EngineError> for Failure {
    fn from(error: EngineError) -> Self {
        Failure::Input(error.to_string())
    }
}

/// What one separated input produced.
pub struct Separated {
    /// The stem files written.
    pub files: Vec<PathBuf>,
    /// The folder they are in.
    pub folder: PathBuf,
}

/// Separates every input into `output/<input name>/`. Prints one error line per failed input
/// and goes on with the next. Returns the number of failed inputs, or a fatal error.
pub fn separate_all(
    inputs: &[PathBuf],
    output: &Path,
    options: &SeparateOptions,
) -> Result<usize, String> {
    std::fs::create_dir_all(output).map_err(|e| {
        format!(
            "cannot create the output folder {}: {}",
            output.display(),
            io_reason(&e)
        )
    })?;
    let mut separator_builder = SeparatorBuilder::new(options);
    // Output folders already used by an earlier input of this run.
    let mut folders: HashMap<PathBuf, PathBuf> = HashMap::new();
    let mut num_failed = 0;
    for input in inputs {
        let folder = output.join(input_name(input));
        if let Some(earlier) = folders.get(&folder) {
            eprintln!(
                "stemflow: error: {}: its stems would overwrite those of {} in {}; rename one of them or separate them in separate runs",
                input.display(),
                earlier.display(),
                folder.display()
            );
            num_failed += 1;
            continue;
        }
        folders.insert(folder.clone(), input.clone());
        match separate_file(input, &folder, options, &mut separator_builder) {
            Ok(separated) => {
                if !options.is_quiet() {
                    println!("  → {}", separated.folder.display());
                    for file in &separated.files {
                        println!(
                            "    {}",
                            file.file_name().unwrap_or_default().to_string_lossy()
                        );
                    }
                }
            }
            Err(Failure::Input(reason)) => {
                eprintln!("stemflow: error: {}: {reason}", input.display());
                num_failed += 1;
            }
            Err(Failure::Fatal(reason)) => return Err(reason),
        }
    }
    if inputs.len() > 1 && !options.is_quiet() {
        println!(
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

/// Builds a separator per input; reports the device (and any fallback) once.
struct SeparatorBuilder<'a> {
    options: &'a SeparateOptions,
    has_reported: bool,
}

impl<'a> SeparatorBuilder<'a> {
    fn new(options: &'a SeparateOptions) -> Self {
        Self {
            options,
            has_reported: false,
        }
    }

    /// Builds the separator; a failure here would repeat for every input, so it is fatal.
    fn build(&mut self) -> Result<Box<dyn Separator>, Failure> {
        let options = self.options;
        let separator = options
            .separator
            .build(options.device)
            .map_err(Failure::Fatal)?;
        let is_first = !self.has_reported;
        self.has_reported = true;
        match separator.active_device() {
            Some(active) => {
                if let Some(reason) = &active.fallback_reason {
                    if options.is_strict_device {
                        return Err(Failure::Fatal(format!(
                            "device {} cannot run the model ({reason}); --strict-device forbids the fallback",
                            active.requested.id()
                        )));
                    }
                    if is_first {
                        eprintln!("stemflow: warning: {reason}");
                    }
                }
                if is_first && !options.is_quiet() {
                    println!("Running {} on {}", separator.name(), active.actual);
                }
            }
            None if options.device != DeviceChoice::Auto
                && options.device != DeviceChoice::Device(DeviceId::CPU) =>
            {
                let message = format!(
                    "the built-in separator runs on the CPU, not on {}",
                    options.device.id()
                );
                if options.is_strict_device {
                    return Err(Failure::Fatal(message));
                }
                if is_first {
                    eprintln!("stemflow: warning: {message}");
                }
            }
            None => {}
        }
        Ok(separator)
    }
}

/// A stem folder this run created: removed again, if still empty, when the input fails.
struct NewFolderGuard<'a> {
    path: &'a Path,
    should_remove: bool,
}

impl<'a> NewFolderGuard<'a> {
    fn create(path: &'a Path) -> Result<Self, Failure> {
        let existed = path.is_dir();
        std::fs::create_dir_all(path).map_err(|e| {
            Failure::Input(format!(
                "cannot create {}: {}",
                path.display(),
                io_reason(&e)
            ))
        })?;
        Ok(Self {
            path,
            should_remove: !existed,
        })
    }

    /// The stems were written: the folder stays.
    fn keep(&mut self) {
        self.should_remove = false;
    }
}

impl Drop for NewFolderGuard<'_> {
    fn drop(&mut self) {
        if self.should_remove {
            // Fails, harmlessly, when something else is in it.
            let _ = std::fs::remove_dir(self.path);
        }
    }
}

/// Separates one input into `folder`.
fn separate_file(
    input: &Path,
    folder: &Path,
    options: &SeparateOptions,
    separator_builder: &mut SeparatorBuilder<'_>,
) -> Result<Separated, Failure> {
    let mut decoder = AudioDecoder::open(input).map_err(Failure::Input)?;
    let info = decoder.info().clone();
    stemflow_engine::validate_sample_rate(info.sample_rate_hz as f32)?;
    let bit_depth = options
        .bit_depth
        .unwrap_or_else(|| BitDepth::default_for(info.integer_bits, options.format));

    // Declared before the writers, so it runs after they removed their partial files.
    let mut new_folder = NewFolderGuard::create(folder)?;
    // Every file is created before the long part starts, so an unwritable folder fails fast.
    let mut writers: Vec<(Stem, StemWriter)> = options
        .stems
        .iter()
        .map(|&stem| {
            let path = folder.join(format!(
                "{}.{}",
                stem.file_name(),
                options.format.extension()
            ));
            StemWriter::create(
                &path,
                options.format,
                bit_depth,
                info.sample_rate_hz,
                info.num_channels,
            )
            .map(|writer| (stem, writer))
        })
        .collect::<Result<_, _>>()
        .map_err(Failure::Input)?;

    let separator = separator_builder.build()?;
    let mut stream = OfflineStream::new(separator, info.sample_rate_hz)?;
    stream.set_extra_stems(options.extra_stems);
    if !options.is_quiet() {
        let length = match info.num_frames {
            Some(n) => format!(
                "{}, ",
                clock(Duration::from_secs_f64(
                    n as f64 / info.sample_rate_hz as f64
                ))
            ),
            None => String::new(),
        };
        println!(
            "Separating {} ({length}{}) into {} {} {}",
            input.display(),
            info.describe(),
            options.stems.len(),
            bit_depth.describe(),
            options.format.extension().to_uppercase(),
        );
    }

    let label = input
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut progress = Progress::start(
        options.progress,
        &label,
        info.num_frames,
        info.sample_rate_hz,
    );
    let mut write = |frames: StemFrames<'_>| -> Result<(), Failure> {
        for (stem, writer) in writers.iter_mut() {
            writer
                .write(frames.channel(*stem, 0), frames.channel(*stem, 1))
                .map_err(Failure::Input)?;
        }
        Ok(())
    };
    let result = (|| {
        while let Some([left, right]) = decoder.next_block().map_err(Failure::Input)? {
            stream.push(left, right, &mut write)?;
            progress.update(decoder.frames_decoded());
        }
        stream.finish(&mut write)
    })();
    if let Err(failure) = result {
        progress.abandon();
        return Err(failure);
    }
    let num_frames = decoder.frames_decoded();
    let elapsed = progress.finish(num_frames);
    new_folder.keep();

    let mut files = Vec::new();
    for (stem, writer) in writers {
        let clipped = writer.clipped_samples();
        if clipped > 0 {
            eprintln!(
                "stemflow: warning: {}: {clipped} samples of {} exceeded full scale and were clipped at {}; use --bit-depth 32f to keep them",
                input.display(),
                stem.file_name(),
                bit_depth.describe()
            );
        }
        files.push(writer.finish().map_err(Failure::Input)?);
    }
    if !options.is_quiet() {
        let audio_s = num_frames as f64 / info.sample_rate_hz as f64;
        let elapsed_s = elapsed.as_secs_f64();
        println!(
            "Separated {:.1} s of audio in {:.1} s (RTF {:.3}, {:.1}x real time)",
            audio_s,
            elapsed_s,
            elapsed_s / audio_s.max(1e-9),
            audio_s / elapsed_s.max(1e-9)
        );
    }
    Ok(Separated {
        files,
        folder: folder.to_path_buf(),
    })
}
