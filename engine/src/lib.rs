//! Stemflow's model core: streaming, DSP and separators.
//!
//! Nothing here knows about plugin APIs. The plugin (`stemflow`) and the command-line tool
//! (`stemflow-cli`) are thin layers over these types:
//!
//! - [`separator::Separator`]: anything that turns stereo audio at its own sample rate into stems,
//!   one fixed hop at a time ([`planar::PlanarBlock`]s in and out), with one control hook for
//!   requests such as a device change; what it is (name, rate, hop, latency, stems, a model's
//!   costs) is one [`separator::SeparatorInfo`], fixed once it is built. [`builtin::BuiltinSeparator`] is the embedded DSP
//!   default; [`passthrough::PassthroughSeparator`] exists to test timing.
//! - [`choice::SeparatorChoice`]: which separator runs, parsed and named in one place (the
//!   engine's `opening` module builds it).
//! - [`stream`]: the real-time boundary. [`stream::StemStreamHandle`] lives on the audio thread and
//!   talks through lock-free `rtrb` ring buffers to the worker thread, which a
//!   [`stream::StemStreamController`] owns on the main thread. Inside, the engine's `pipeline`
//!   resamples host audio to the separator's rate and back; the handle computes `Other` as the
//!   exact residual at the host rate.
//! - [`offline`]: whole-file separation through the very same streaming path.
//! - [`whole_file`]: whole-file separation exact to each family's reference, edges included
//!   (what `stemflow separate` runs by default).
//! - [`families`]: neural model families (HTDemucs, MDX-Net, RoFormer, Spleeter), one file
//!   each, and [`families::ModelSeparator`], which streams any of them.
//! - [`hybrid`]: routes — separators chained stem by stem (e.g. Spleeter's vocals + built-in).
//! - [`ensemble`]: several separators' stems combined stem by stem (MSST's and UVR's ensembles).
//! - [`runtime`]: ONNX Runtime — loading it, devices, sessions, model files, running graphs.
//! - [`models`]: the models folder; [`ModelError`]: why a model cannot be used.
//! - [`Stem`], [`dsp`], [`paths`]: the stems, sample-level helpers, the user's folders.
//!
//! Only what the plugin, the command line and the tests use is public; the modules behind it
//! (`pipeline`, `opening`, `interleave`, `stem_sink`, …) are the engine's own. Host heuristics
//! (a host bouncing faster than real time) live in the plugin.
//!
//! The synthetic demo song, metrics and WAV helpers live in the `stemflow-kit` crate.

pub mod builtin;
pub mod choice;
pub mod dsp;
pub mod ensemble;
mod error;
pub mod families;
#[cfg(feature = "fault-injection")]
pub mod fault;
pub mod hybrid;
mod interleave;
pub mod look_ahead;
mod model_error;
pub mod models;
pub mod offline;
mod opening;
pub mod passthrough;
mod pipeline;
pub mod planar;
pub mod runtime;
pub mod separator;
mod separator_info;
mod stem;
mod stem_sink;
pub mod stream;
#[cfg(test)]
mod testing;
pub mod whole_file;

pub use error::{validate_sample_rate, EngineError, MAX_SAMPLE_RATE_HZ, MIN_SAMPLE_RATE_HZ};
pub use model_error::ModelError;
pub use stem::{ExtraStems, Stem, NUM_STEMS};
/// Where Stemflow keeps its files (the `stemflow-paths` crate).
pub use stemflow_paths as paths;
