//! Stemflow's model core: streaming, DSP and separators.
//!
//! Nothing here knows about plugin APIs. The plugin (`stemflow`) and the command-line tool
//! (`stemflow-cli`) are thin layers over these types:
//!
//! - [`Separator`]: anything that turns stereo audio at its own sample rate into stems, one
//!   fixed hop at a time ([`PlanarBlock`]s in and out), with one control hook for requests such
//!   as a device change; what it is (name, rate, hop, latency, stems, a model's costs) is one
//!   [`SeparatorInfo`], fixed once it is built. [`BuiltinSeparator`] is the embedded DSP default;
//!   [`PassthroughSeparator`] exists to test timing.
//! - [`SeparatorChoice`]: which separator runs, parsed and named in one place (the engine's
//!   `opening` module builds it); [`LookAhead`]: how far ahead a model may look.
//! - [`stream`]: the real-time boundary. [`stream::StemStreamHandle`] lives on the audio thread and
//!   talks through lock-free `rtrb` ring buffers to the worker thread, which a
//!   [`stream::StemStreamController`] owns on the main thread. Inside, the engine's `pipeline`
//!   resamples host audio to the separator's rate and back; the handle computes `Other` as the
//!   exact residual at the host rate.
//! - [`OfflineStream`]: whole-file separation through the very same streaming path.
//! - [`whole_file`]: whole-file separation exact to each family's reference, edges included
//!   (what `stemflow separate` runs by default).
//! - [`families`]: neural model families (HTDemucs, MDX-Net, RoFormer, Spleeter), one file
//!   each, and [`families::ModelSeparator`], which streams any of them.
//! - [`hybrid`]: routes — separators chained stem by stem (e.g. Spleeter's vocals + built-in).
//! - [`ensemble`]: several separators' stems combined stem by stem (MSST's and UVR's ensembles).
//! - [`runtime`]: ONNX Runtime — loading it, devices, sessions, model files, running graphs.
//! - [`scan_models`], [`ModelInfo`]: the models folders; [`ModelError`]: why a model cannot be
//!   used.
//! - [`Stem`], [`DenormalGuard`], [`paths`]: the stems, the audio thread's float mode, the
//!   user's folders.
//!
//! The crate's root names what the plugin, the command line and the tests use; its public
//! modules are the areas with a surface of their own (streams, whole files, families, routes,
//! ensembles, the runtime), each behind curated re-exports. The modules behind them (`pipeline`,
//! `opening`, `interleave`, `stem_sink`, `offline`, `separator`, …) are the engine's own. Host
//! heuristics (a host bouncing faster than real time) live in the plugin.
//!
//! The synthetic demo song, metrics and WAV helpers live in the `stemflow-kit` crate.

mod builtin;
mod choice;
mod dsp;
pub mod ensemble;
mod error;
pub mod families;
#[cfg(feature = "fault-injection")]
pub mod fault;
pub mod hybrid;
mod interleave;
mod look_ahead;
mod model_error;
mod model_spec;
mod models;
mod offline;
mod opening;
mod passthrough;
mod pipeline;
mod planar;
pub mod runtime;
mod separator;
mod separator_info;
mod stem;
mod stem_sink;
mod stereo_input;
pub mod stream;
#[cfg(test)]
mod testing;
pub mod whole_file;

pub use builtin::{
    BuiltinSeparator, BUILTIN_DISPLAY_NAME, BUILTIN_SAMPLE_RATE_HZ, BUILTIN_STEMS,
    HOP_SAMPLES as BUILTIN_HOP_SAMPLES,
};
pub use choice::{models_dirs, SeparatorChoice, ROUTE_EXTENSION};
pub use dsp::DenormalGuard;
pub use error::{validate_sample_rate, EngineError, MAX_SAMPLE_RATE_HZ, MIN_SAMPLE_RATE_HZ};
pub use families::ModelFamily;
pub use look_ahead::{LookAhead, LOOK_AHEAD_CHOICES};
pub use model_error::ModelError;
pub use model_spec::ModelSpec;
pub use models::{find_by_sha256, inspect_model, scan_models, ModelInfo};
pub use offline::{OfflineStream, SeparatedStems, StemFrames};
pub use passthrough::PassthroughSeparator;
pub use planar::PlanarBlock;
pub use separator::{
    stem_channel, Separator, SeparatorError, SeparatorInfo, SeparatorRequest, SEPARATED_CHANNELS,
};
pub use stem::{ExtraStems, Stem, NUM_STEMS};
/// Where Stemflow keeps its files (the `stemflow-paths` crate).
pub use stemflow_paths as paths;
pub use stereo_input::StereoInput;
