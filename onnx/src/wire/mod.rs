//! The protobuf wire format, as much as ONNX files need: [`Fields`] reads a message's fields
//! one after another without building anything; the `put_*` functions encode them.

mod read;
mod write;

pub use read::{read_varint, FieldValue, Fields};
pub use write::{
    key_len, put_bytes, put_float, put_int64, put_key, put_varint, varint_len, WIRE_FIXED32,
    WIRE_LEN, WIRE_VARINT,
};
