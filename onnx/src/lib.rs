//! Stemflow's one ONNX layer: the only place ONNX files are read and written.
//!
//! - [`field`]: the field numbers of `onnx.proto` and the enum values used, named once.
//! - [`wire`]: the protobuf wire format — [`wire::Fields`] reads a message's fields one after
//!   another without copying (a 300 MB model is walked in place), the `put_*` functions write.
//! - [`view`]: borrowed views of nodes, attributes, tensors and value infos, and every field of
//!   a message with its own bytes, so a rewriter copies what it does not change as it was.
//! - [`model`]: a `ModelProto`'s graph, operator set and metadata, and the model rebuilt around
//!   a rewritten graph.
//! - [`encode`]: messages encoded from their parts (what rewriters add to a graph).
//! - [`graph`]: [`OnnxGraph`], the builder the converters write whole models with.
//! - [`external_data`]: every external-data reference in a file, subgraphs included.
//! - [`kernels`]: which nodes ONNX Runtime's CPU, CUDA and DirectML providers have kernels for,
//!   from a committed table of its registrations (`stemflow models inspect`).
//!
//! No dependencies. Generated protobuf types were measured against these readers and writers:
//! see `docs/internals.md`.

pub mod encode;
pub mod external_data;
pub mod field;
pub mod graph;
pub mod kernels;
pub mod model;
pub mod view;
pub mod wire;

pub use encode::{Attribute, Dim};
pub use graph::{GraphError, OnnxGraph};
pub use model::ModelView;
pub use view::{AttributeView, DimView, GraphPart, NodeView, RawField, TensorView, ValueInfoView};
