//! [`StemFiles`]: one input's stem files, from their creation (all before the long part
//! starts, so an unwritable folder fails fast) to their final names (all or none), with the
//! disk watched as they grow.

use std::path::{Path, PathBuf};

use stemflow_engine::{Stem, StemFrames};

use super::options::{Failure, SeparateOptions};
use crate::decode::SourceInfo;
use crate::disk_space::DiskGuard;
use crate::encode::{BitDepth, StemWriter};

/// The stem files of one input being written.
pub(super) struct StemFiles {
    writers: Vec<(Stem, StemWriter)>,
    /// The run stops before the disk is full (an endless pipe, an input too long for the disk).
    disk: DiskGuard,
    /// Bytes the files grow by per frame of audio.
    bytes_per_frame: u64,
    sample_rate_hz: u32,
    bit_depth: BitDepth,
}

impl StemFiles {
    /// Creates the files of `options.stems` in `folder` for audio described by `info`, at
    /// `bit_depth`. Not realtime-safe: file I/O.
    pub(super) fn create(
        folder: &Path,
        options: &SeparateOptions,
        info: &SourceInfo,
        bit_depth: BitDepth,
    ) -> Result<Self, Failure> {
        let disk = DiskGuard::new(folder).map_err(Failure::Input)?;
        let bytes_per_frame = (options.stems.len() * info.num_channels) as u64
            * u64::from(bit_depth.bits().div_ceil(8));
        let writers = options
            .stems
            .iter()
            .map(|&stem| {
                StemWriter::create(
                    &options.stem_path(folder, stem),
                    options.format,
                    bit_depth,
                    info.sample_rate_hz,
                    info.num_channels,
                )
                .map(|writer| (stem, writer))
            })
            .collect::<Result<_, _>>()
            .map_err(Failure::Input)?;
        Ok(Self {
            writers,
            disk,
            bytes_per_frame,
            sample_rate_hz: info.sample_rate_hz,
            bit_depth,
        })
    }

    /// Appends `frames` of every stem, or stops when the disk is about to fill.
    pub(super) fn write(&mut self, frames: &StemFrames<'_>) -> Result<(), Failure> {
        self.disk
            .wrote(frames.num_frames() as u64 * self.bytes_per_frame)
            .map_err(|reason| {
                Failure::Input(format!(
                    "stopped after {:.1} s of audio: {reason}; the stems begun were removed",
                    frames.first_frame() as f64 / f64::from(self.sample_rate_hz)
                ))
            })?;
        for (stem, writer) in self.writers.iter_mut() {
            writer
                .write(frames.channel(*stem, 0), frames.channel(*stem, 1))
                .map_err(Failure::Input)?;
        }
        Ok(())
    }

    /// Completes every file, then gives each its final name: an input whose last stem fails
    /// leaves none of its new stems, and no temporary file. Warns of samples clipped for
    /// `input`. Returns the files.
    pub(super) fn commit(self, input: &Path) -> Result<Vec<PathBuf>, Failure> {
        let mut finished = Vec::new();
        for (stem, writer) in self.writers {
            let clipped = writer.clipped_samples();
            if clipped > 0 {
                crate::output::say_err!(
                    "stemflow: warning: {}: {clipped} samples of {} exceeded full scale and were clipped at {}; use --bit-depth 32f to keep them",
                    input.display(),
                    stem.file_name(),
                    self.bit_depth.describe()
                );
            }
            finished.push(writer.finalize().map_err(Failure::Input)?);
        }
        finished
            .into_iter()
            .map(|stem| stem.commit().map_err(Failure::Input))
            .collect()
    }
}
