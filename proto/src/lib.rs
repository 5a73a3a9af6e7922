//! The protobuf wire format, as much as Stemflow's ONNX readers and writers need: [`Fields`]
//! reads a message's fields one after another without building anything, [`write`] encodes
//! them. Field numbers and message layouts stay with the code that knows them (`onnx.proto`).

mod fields;
pub mod write;

pub use fields::{read_varint, FieldValue, Fields};
