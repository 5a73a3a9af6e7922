//! One input: decode, separate and write its stems, leaving nothing half-done behind.

use std::path::{Path, PathBuf};
use std::time::Duration;

use stemflow_engine::offline::StemFrames;
use stemflow_engine::Stem;

use super::decode_ahead::PendingDecode;
use super::new_folder::NewFolderGuard;
use super::options::{Failure, SeparateOptions, Separated};
use super::slot::SeparatorSlot;
use crate::decode::io_reason;
use crate::disk_space::DiskGuard;
use crate::encode::{BitDepth, StemWriter};
use crate::progress::{clock, Progress};

/// Where `stem`'s file goes in `folder`.
pub(super) fn stem_path(folder: &Path, stem: Stem, options: &SeparateOptions) -> PathBuf {
    folder.join(format!(
        "{}.{}",
        stem.file_name(),
        options.format.extension()
    ))
}

/// Separates one input, whose decoding has started, into `folder`.
pub(super) fn separate_file(
    pending: PendingDecode,
    folder: &Path,
    options: &SeparateOptions,
    separator_slot: &mut SeparatorSlot<'_>,
) -> Result<Separated, Failure> {
    let input = &pending.path().to_path_buf();
    let mut decoder = pending.open().map_err(Failure::Input)?;
    let info = decoder.info().clone();
    stemflow_engine::validate_sample_rate(info.sample_rate_hz as f32)?;
    let bit_depth = options
        .bit_depth
        .unwrap_or_else(|| BitDepth::default_for(info.integer_bits, options.format));

    // Declared before the writers, so it runs after they removed their partial files.
    let mut new_folder = NewFolderGuard::create(folder).map_err(|e| {
        Failure::Input(format!(
            "cannot create {}: {}",
            folder.display(),
            io_reason(&e)
        ))
    })?;
    // The run stops before the disk is full (an endless pipe, an input too long for the disk).
    let mut disk = DiskGuard::new(folder).map_err(Failure::Input)?;
    let bytes_per_frame =
        (options.stems.len() * info.num_channels) as u64 * u64::from(bit_depth.bits().div_ceil(8));
    // Every file is created before the long part starts, so an unwritable folder fails fast.
    let mut writers: Vec<(Stem, StemWriter)> = options
        .stems
        .iter()
        .map(|&stem| {
            let path = stem_path(folder, stem, options);
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

    let mut stream = separator_slot.take()?.open(info.sample_rate_hz)?;
    stream.set_extra_stems(options.extra_stems);
    separator_slot
        .report_look_ahead(stream.latency_samples() as f64 / f64::from(info.sample_rate_hz));
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
        crate::output::say!(
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
        disk.wrote(frames.num_frames() as u64 * bytes_per_frame)
            .map_err(|reason| {
                Failure::Input(format!(
                    "stopped after {:.1} s of audio: {reason}; the stems begun were removed",
                    frames.first_frame() as f64 / f64::from(info.sample_rate_hz)
                ))
            })?;
        for (stem, writer) in writers.iter_mut() {
            writer
                .write(frames.channel(*stem, 0), frames.channel(*stem, 1))
                .map_err(Failure::Input)?;
        }
        // Progress follows the stems written, not the input read: a model's stems trail its
        // input by the latency (seconds for HTDemucs or MDX-Net), and a long model run would
        // otherwise sit at 90 % while the stems of the file's end are still to come.
        progress.update(frames.first_frame() + frames.num_frames() as u64);
        Ok(())
    };
    let result = (|| {
        while let Some([left, right]) = decoder.next_block().map_err(Failure::Input)? {
            stream.push(left, right, &mut write)?;
            if let Some(signal) = crate::interrupt::received() {
                return Err(Failure::Interrupted(signal));
            }
        }
        stream.finish(&mut write)
    })();
    let num_non_finite = stream.non_finite_input_samples();
    // The loaded model serves the next input, whatever happened to this one.
    separator_slot.put_back(stream.into_model());
    if let Err(failure) = result {
        progress.abandon();
        return Err(failure);
    }
    let num_frames = decoder.frames_decoded();
    let elapsed = progress.finish(num_frames);
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
    new_folder.keep();

    // Every stem is completed before any gets its final name: an input whose last stem fails
    // leaves none of its new stems, and no temporary file.
    let mut finished = Vec::new();
    for (stem, writer) in writers {
        let clipped = writer.clipped_samples();
        if clipped > 0 {
            crate::output::say_err!(
                "stemflow: warning: {}: {clipped} samples of {} exceeded full scale and were clipped at {}; use --bit-depth 32f to keep them",
                input.display(),
                stem.file_name(),
                bit_depth.describe()
            );
        }
        finished.push(writer.finalize().map_err(Failure::Input)?);
    }
    let files = finished
        .into_iter()
        .map(|stem| stem.commit().map_err(Failure::Input))
        .collect::<Result<Vec<_>, _>>()?;
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
