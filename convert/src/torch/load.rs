//! [`load_torch_checkpoint`]: a `torch.save` file, in either layout, as a [`TorchCheckpoint`].
//! The zip layout is read by `zip_layout.rs`, the legacy one by `legacy.rs`; very old tar
//! checkpoints (torch < 0.4) are refused.

use super::checkpoint::TorchCheckpoint;
use super::legacy::load_legacy;
use super::zip_layout::load_zip;
use crate::budget::ReadBudget;
use crate::error::ConvertError;

/// Loads a `torch.save` file (zip or legacy layout) from its bytes, without running anything.
///
/// The pickle runs on the restricted machine ([module docs](super)): dicts, OrderedDicts,
/// lists, tuples, ints, floats, strings, bytes, bools, None, `fractions.Fraction`, tensors
/// (`torch._utils._rebuild_tensor_v2`, `_rebuild_parameter`) and float32 numpy arrays; any other
/// class is kept as a name ([`Value::Global`](super::Value::Global)) when used as a value and refused, by name, when
/// the pickle would call or instantiate it. Tensors of any storage dtype load with their
/// storage offsets and strides checked against their storage (contiguous ones borrow the file's
/// bytes; views are gathered), and tensors sharing a storage each get their own view.
///
/// Everything the read allocates (values, inflated entries, gathered views) is charged to one
/// [`ReadBudget`] for the file ([`ReadBudget::for_file`]); [`load_torch_checkpoint_within`]
/// takes another.
///
/// Fails with [`ConvertError::Zip`] for a damaged archive, [`ConvertError::Pickle`] for a pickle
/// that is damaged or asks for anything outside the allow-list, and [`ConvertError::Layout`] for
/// a file that is neither layout, a missing or wrongly sized storage, or a big-endian file; a
/// read that would pass the budget fails with one of these, saying so. Not realtime-safe:
/// allocates the tree and the gathered views.
pub fn load_torch_checkpoint(bytes: &[u8]) -> Result<TorchCheckpoint<'_>, ConvertError> {
    load_torch_checkpoint_within(bytes, &ReadBudget::for_file(bytes.len()))
}

/// [`load_torch_checkpoint`], charging `budget`. Not realtime-safe: see there.
pub fn load_torch_checkpoint_within<'a>(
    bytes: &'a [u8],
    budget: &ReadBudget,
) -> Result<TorchCheckpoint<'a>, ConvertError> {
    crate::cancel::check()?;
    if bytes.starts_with(b"PK\x03\x04") {
        load_zip(bytes, budget)
    } else if bytes.first() == Some(&0x80) {
        load_legacy(bytes, budget)
    } else if bytes.get(257..262) == Some(b"ustar") {
        Err(ConvertError::Layout(
            "a tar checkpoint (torch before 0.4) is not supported: load and save it again \
             with a current torch"
                .to_string(),
        ))
    } else {
        Err(ConvertError::Layout(format!(
            "not a torch checkpoint: {} bytes that are neither a zip archive nor a legacy \
             pickle stream",
            bytes.len()
        )))
    }
}
