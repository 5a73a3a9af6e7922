//! Stemflow's model core: streaming, DSP and separators.
//!
//! Nothing here knows about plugin APIs. The plugin (`stemflow`) and the command-line tool
//! (`stemflow-cli`) are thin layers over these types:
//!
//! - [`separator::Separator`]: anything that turns stereo audio at its own sample rate into stems,
//!   one fixed hop at a time ([`planar::PlanarBlock`]s in and out), with one control hook for
//!   requests such as a device change. [`builtin::BuiltinSeparator`] is the embedded DSP
//!   default; [`passthrough::PassthroughSeparator`] exists to test timing.
//! - [`choice::SeparatorChoice`]: which separator runs, parsed and named in one place;
//!   [`opening`] builds it.
//! - [`pipeline::StemPipeline`]: resamples host audio to the separator's rate and back and runs the
//!   separator; the stream's handle computes `Other` as the exact residual at the host rate.
//! - [`stream`]: the real-time boundary. [`stream::StemStreamHandle`] lives on the audio thread and
//!   talks through lock-free `rtrb` ring buffers to the worker thread, which a
//!   [`stream::StemStreamController`] owns on the main thread.
//! - [`offline`]: whole-file separation through the very same streaming path.
//! - [`families`]: neural model families (HTDemucs, MDX-Net, RoFormer, Spleeter), one file
//!   each, and [`families::ModelSeparator`], which streams any of them.
//! - [`hybrid`]: routes — separators chained stem by stem (e.g. Spleeter's vocals + built-in).
//! - [`runtime`]: ONNX Runtime — loading it, devices, sessions, model files, running graphs.
//! - [`models`]: the models folder; [`model_error::ModelError`]: why a model cannot be used.
//! - [`stem`], [`dsp`], [`interleave`], [`paths`]: the stems, sample-level helpers, stereo frames
//!   in and out of the ring buffers, the user's folders.
//!
//! The synthetic demo song, metrics and WAV helpers live in the `stemflow-kit` crate.

pub mod builtin;
pub mod choice;
pub mod dsp;
pub mod error;
pub mod families;
#[cfg(feature = "fault-injection")]
pub mod fault;
pub mod hybrid;
pub mod interleave;
pub mod look_ahead;
pub mod model_error;
pub mod models;
pub mod offline;
pub mod opening;
pub mod passthrough;
pub mod pipeline;
pub mod planar;
pub mod render_speed;
pub mod runtime;
pub mod separator;
pub mod stem;
pub mod stem_sink;
pub mod stream;

pub use error::{validate_sample_rate, EngineError, MAX_SAMPLE_RATE_HZ, MIN_SAMPLE_RATE_HZ};
pub use stem::{ExtraStems, Stem, NUM_STEMS};
/// Where Stemflow keeps its files (the `stemflow-paths` crate).
pub use stemflow_paths as paths;
