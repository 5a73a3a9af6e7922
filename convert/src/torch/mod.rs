//! Reading `torch.save` files without Python and without running them.
//!
//! A pickle is a program for a stack machine that may import and call anything. The one here
//! (`machine`) runs it symbolically and never imports or calls anything: data opcodes build
//! values, and the few calls torch's and numpy's pickles make are interpreted, for an
//! allow-list of globals and for the arguments those take:
//!
//! - `collections.OrderedDict()` (and the attributes a state dict's `BUILD` gives it, dropped);
//! - `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[,
//!   metadata])` and `torch._utils._rebuild_parameter(tensor, requires_grad, hooks)`, with
//!   storages from torch's persistent ids and the storage classes (`torch.FloatStorage`,
//!   `torch.HalfStorage`, … also under `torch.cuda`) as their types;
//! - `fractions.Fraction(n, d)` or `Fraction('n/d')`;
//! - numpy's `_reconstruct(ndarray, (0,), b'b')`, `dtype(kind, False, True)`, their `BUILD`
//!   states, and `_codecs.encode(text, 'latin1')` (protocol 2's bytes).
//!
//! Any other global is kept as an opaque name when used as a value (demucs' `"klass"`) and
//! refused, by name, when the pickle would call it (`REDUCE`), instantiate it (`NEWOBJ`) or set
//! its state (`BUILD`): `posix.system`, `builtins.eval`, a model class. Protocols 2 to 5 are read
//! (`torch.save` writes 2); text opcodes of protocols 0 and 1, `INST`, `OBJ`, `EXT*`, sets,
//! out-of-band buffers and `LONG4` are refused by name and byte offset.
//!
//! Every size is bounded: stack depth, mark depth, tuple nesting, memo entries and value-tree
//! depth by constants, string lengths by the remaining input, shapes by overflow checks, and
//! every tensor's offset, size and strides against its storage. On top of these, one
//! [`ReadBudget`] per file bounds everything a read allocates beyond the file's bytes (items in
//! containers and the memo, the value tree and each copy of a shared string, inflated entries,
//! gathered views, numpy arrays) at [`BUDGET_FLOOR_BYTES`] + [`BUDGET_BYTES_PER_FILE_BYTE`] ×
//! the file's size, charged before each allocation: a 1 MB crafted file cannot make a read
//! allocate more than 68 MiB. No input makes it panic or recurse deeply.
//!
//! - [`load_torch_checkpoint`]: a checkpoint file (zip or legacy layout) as a [`Value`] tree and
//!   its [`Tensor`]s; [`TorchCheckpoint::state_dict`] lists a state dict's tensors.
//! - [`load_numpy_dict`]: a pickled dict of float32 numpy arrays (Spleeter's checkpoints).

mod calls;
mod checkpoint;
mod item;
mod latin1;
mod legacy;
mod load;
mod machine;
mod numpy;
pub(crate) mod opcode;
mod persistent;
mod setstate;
mod storage_refs;
mod tensor;
mod value;
mod zip_layout;

pub use crate::budget::{ReadBudget, BUDGET_BYTES_PER_FILE_BYTE, BUDGET_FLOOR_BYTES};
pub use checkpoint::{CheckpointLayout, TorchCheckpoint};
pub use load::{load_torch_checkpoint, load_torch_checkpoint_within};
pub use numpy::{load_numpy_dict, NdArray};
pub use tensor::{DType, Tensor};
pub use value::Value;
