//! The separating stage of a job: one input, whose decoding has started, through the separator
//! into its stem files, leaving nothing half-done behind.

use std::path::Path;
use std::time::Duration;

use stemflow_engine::whole_file::{WholeFileSeparator, WholeFileStream};
use stemflow_engine::{StemFrames, StereoInput};

use super::decode_ahead::{DecodeAhead, PendingDecode};
use super::new_folder::NewFolderGuard;
use super::options::{Failure, SeparateOptions, Separated};
use super::stem_files::StemFiles;
use crate::decode::{io_reason, SourceInfo};
use crate::encode::BitDepth;
use crate::progress::{clock, Progress};

/// Separates `pending` into `folder` with `separator`, which it hands back for the next input
/// (whatever happened to this one). `on_latency` hears the stream's latency in seconds once
/// the stream is built (0 for whole files).
pub(super) fn separate_file(
    pending: PendingDecode,
    folder: &Path,
    options: &SeparateOptions,
    mut separator: WholeFileSeparator,
    on_latency: &mut dyn FnMut(f64),
) -> (Result<Separated, Failure>, WholeFileSeparator) {
    let input = pending.path().to_path_buf();
    let decoder = match pending.open().map_err(Failure::Input).and_then(|decoder| {
        stemflow_engine::validate_sample_rate(decoder.info().sample_rate_hz as f32)?;
        Ok(decoder)
    }) {
        Ok(decoder) => decoder,
        Err(failure) => return (Err(failure), separator),
    };
    let sample_rate_hz = decoder.info().sample_rate_hz;
    separator.set_extra_stems(options.extra_stems);
    let result = separator
        .stream(sample_rate_hz)
        .map_err(Failure::from)
        .and_then(|stream| {
            on_latency(stream.latency_samples() as f64 / f64::from(sample_rate_hz));
            separate_stream(&input, decoder, stream, folder, options)
        });
    // Finished or dropped, the stream left the loaded models to the next input (a stream's
    // separator whose worker died is built again).
    (result, separator)
}

/// Runs the decoded input through `stream` into new stem files in `folder`.
fn separate_stream(
    input: &Path,
    mut decoder: DecodeAhead,
    mut stream: WholeFileStream<'_>,
    folder: &Path,
    options: &SeparateOptions,
) -> Result<Separated, Failure> {
    let info = decoder.info().clone();
    let bit_depth = options
        .bit_depth
        .unwrap_or_else(|| BitDepth::default_for(info.integer_bits, options.format));
    // Declared before the files, so it runs after they removed their partial files.
    let mut new_folder = NewFolderGuard::create(folder).map_err(|e| {
        Failure::Input(format!(
            "cannot create {}: {}",
            folder.display(),
            io_reason(&e)
        ))
    })?;
    let mut files = StemFiles::create(folder, options, &info, bit_depth)?;
    if !options.is_quiet() {
        announce(input, &info, options, bit_depth);
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
        files.write(&frames)?;
        // Progress follows the stems written, not the input read: a model's stems trail its
        // input by the latency (seconds for HTDemucs or MDX-Net), and a long model run would
        // otherwise sit at 90 % while the stems of the file's end are still to come.
        progress.update(frames.first_frame() + frames.num_frames() as u64);
        Ok(())
    };
    let result = (|| {
        while let Some([left, right]) = decoder.next_block().map_err(Failure::Input)? {
            stream.push(StereoInput::new(left, right)?, &mut write)?;
            if let Some(signal) = crate::interrupt::received() {
                return Err(Failure::Interrupted(signal));
            }
        }
        Ok(())
    })();
    let num_non_finite = stream.stats().non_finite_input_samples;
    let result = result.and_then(|()| stream.finish(&mut write));
    if let Err(failure) = result {
        progress.abandon();
        return Err(failure);
    }
    let num_frames = decoder.frames_decoded();
    let elapsed = progress.finish(num_frames);
    warn_of_damage(input, &decoder, &info, num_non_finite);
    new_folder.keep();
    let files = files.commit(input)?;
    let audio_s = num_frames as f64 / info.sample_rate_hz as f64;
    let elapsed_s = elapsed.as_secs_f64();
    if !options.is_quiet() {
        crate::output::say!(
            "Separated {:.1} s of audio in {:.1} s (RTF {:.3}, {})",
            audio_s,
            elapsed_s,
            elapsed_s / audio_s.max(1e-9),
            crate::progress::speed(elapsed_s / audio_s.max(1e-9))
        );
    }
    Ok(Separated {
        files,
        folder: folder.to_path_buf(),
        audio_s,
        elapsed_s,
    })
}

/// Says what is about to be separated, into what.
fn announce(input: &Path, info: &SourceInfo, options: &SeparateOptions, bit_depth: BitDepth) {
    let length = match info.num_frames {
        Some(n) => format!(
            "{}, ",
            clock(Duration::from_secs_f64(
                n as f64 / info.sample_rate_hz as f64
            ))
        ),
        None => String::new(),
    };
    crate::output::say!(
        "Separating {} ({length}{}) into {} {} {}",
        input.display(),
        info.describe(),
        options.stems.len(),
        bit_depth.describe(),
        options.format.extension().to_uppercase(),
    );
}

/// Warns of what the decoder could not read and of samples that were not numbers.
fn warn_of_damage(input: &Path, decoder: &DecodeAhead, info: &SourceInfo, num_non_finite: u64) {
    let damaged = decoder.damaged_at_s();
    if !damaged.is_empty() {
        let times: Vec<String> = damaged
            .iter()
            .take(5)
            .map(|t| format!("{t:.2} s"))
            .collect();
        crate::output::say_err!(
            "stemflow: warning: {}: damaged audio replaced by silence at {}{}; the rest was decoded",
            input.display(),
            times.join(", "),
            if damaged.len() > 5 { ", …" } else { "" }
        );
    }
    let skipped = decoder.skipped_frames();
    if skipped > 0 {
        crate::output::say_err!(
            "stemflow: warning: {}: {skipped} frames ({:.2} s) of damaged audio were skipped by the decoder at an unknown place; the stems are padded to the file's length, but what follows the damage is early by that much",
            input.display(),
            skipped as f64 / f64::from(info.sample_rate_hz)
        );
    }
    if num_non_finite > 0 {
        crate::output::say_err!(
            "stemflow: warning: {}: {num_non_finite} samples were NaN or infinite and were treated as silence",
            input.display()
        );
    }
}
