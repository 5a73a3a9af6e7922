//! ONNX Runtime, loaded dynamically: finding the library, loading it once per process, and the
//! clear message when that fails.
//!
//! - `library.rs`: finding the library and loading it once per process;
//! - `device_id.rs`: device ids and choices; `devices.rs`: discovery and `Auto`; `build.rs`: one session on one device;
//!   `session.rs`: warmed sessions shared between instances; `device_switch.rs`: building a
//!   session for another device in the background;
//! - `model_file.rs` (with `protobuf.rs`): a model file's bytes, hash and safety checks;
//!   `signature.rs`: a graph's inputs and outputs; `runner.rs`: running a graph with fallback.
//!
//! Nothing in Stemflow touches `ort` before [`runtime`] returned `Ok`: with no library loaded,
//! `ort` would look for one on its own and panic, which inside a plugin host aborts the host.
//!
//! Resolution order: `STEMFLOW_ORT_LIB`, the path saved in the settings file, next to the binary
//! (the plugin bundle or the `stemflow` executable), the user data folder's `runtime/`. The first
//! two are explicit: when set, only they are tried.

pub(crate) mod bound_io;
pub(crate) mod build;
pub(crate) mod constant_fold;
pub(crate) mod device_id;
pub(crate) mod device_switch;
pub(crate) mod devices;
pub(crate) mod fair_mutex;
pub(crate) mod fold_plan;
pub(crate) mod gpu_tuning;
pub(crate) mod graph_cache;
pub(crate) mod graph_files;
pub(crate) mod graph_io;
mod library;
pub(crate) mod model_file;
pub(crate) mod plain_run;
pub(crate) mod runner;
pub(crate) mod session;
pub(crate) mod session_slot;
pub(crate) mod signature;

pub use build::{
    build_session, build_session_with, intra_threads, set_thread_budget, ThreadBudget,
};
pub use constant_fold::try_fold;
pub use devices::{
    auto_device, devices, ActiveDevice, DeviceChoice, DeviceEvent, DeviceId, DeviceInfo,
    DeviceStatus, Provider,
};
pub use fold_plan::{plan as plan_folding, FoldPlan};
pub use gpu_tuning::{override_setting, ConvSearch, GpuTuning, TF32_ENV};
pub use graph_cache::{cached_graph_path, folded_graph_path, partial_path, CacheEntry};
pub use graph_files::{gpu_graph_path, graph_for, GraphChoice};
pub use library::{
    library_candidates, runtime, LibraryCandidate, LibrarySource, Runtime, RuntimeError, FIX_HINT,
    REQUIRED_RUNTIME, RUNTIME_LIBRARY_ENV, SETTINGS_LIBRARY_KEY,
};
pub use model_file::{read_model_file, ModelBytes};
pub use runner::{run_graph, run_graph_io, GraphIo, ModelRunner};
pub use session::{live_session_count, Precision, DEFAULT_GPU_PRECISION};
pub use session_slot::SessionSlot;
pub use signature::{GraphSignature, TensorSignature};
