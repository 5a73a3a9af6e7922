//! Which nodes of a model ONNX Runtime's CPU, CUDA and DirectML execution providers have kernels
//! for, without ONNX Runtime: from a committed table of its kernel registrations
//! (`onnx/data/ort_kernels.txt`; `onnx/data/README.md` names the sources and versions).
//!
//! - `provider.rs`: the providers covered; `table.rs`: the table, read once; `element.rs`:
//!   element types and sets of them; `types.rs`: every value's element type (declared or
//!   inferred); `inspect.rs`: the check; `gpu_check.rs`: the one-call check for GPU graphs.
//!
//! A node is checked by operator, domain, the model's operator-set version and the element types
//! of its inputs and outputs against each constraint the registration lists (`T = float,
//! float16`: a float64 `Add` fails on DirectML). The table lists each constraint's types as the
//! union over the registered combinations, as ONNX Runtime's documentation does, so a kernel
//! registered for (float16, float) and (float, float) but not (float16, float16) passes here.
//!
//! The API other crates' tests use: [`check_gpu_graph`] ("no node CUDA or DirectML cannot run,
//! no float64"), [`inspect`] and [`Inspection`] for the details.

mod element;
mod gpu_check;
mod inspect;
mod provider;
mod table;
mod types;

pub use gpu_check::{check_gpu_graph, sources};
pub use inspect::{inspect, Inspection, NodeFinding};
pub use provider::Provider;
