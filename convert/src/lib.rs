//! How Stemflow's graphs are built: published model checkpoints turned into ONNX graphs Stemflow
//! loads like any user model, and the graph rewriters.
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
//!   inside, for GPUs ([`Target`]). [`yaml`] reads the YAML Python tools write (MSST configs,
//!   demucs bags).
//! - [`cancel`]: a conversion stopped from another thread between its steps.
//!
//! Where the checkpoints come from (the catalogue, downloads, imports, installing into the
//! models folder) is the `stemflow-fetch` crate.

pub mod budget;
pub mod cancel;
pub mod error;
pub mod float16;
pub mod htdemucs;
pub mod mdx;
mod ops;
pub mod quantize;
pub mod roformer;
pub mod spleeter;
mod state;
#[cfg(any(test, feature = "test-writers"))]
pub mod testing;
pub mod torch;
/// The one YAML reader (the `stemflow-yaml` crate).
pub use stemflow_yaml as yaml;
pub mod zip;

pub use error::ConvertError;
pub use ops::{Precision, Target};
