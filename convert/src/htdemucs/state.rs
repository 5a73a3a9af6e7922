//! [`ModelState`]: an HTDemucs checkpoint's `state` tensors, taken one by one with their
//! expected shapes; what is left over when the graph is built is an error, so a checkpoint
//! with layers the converter does not know is refused, never half-used.

use std::collections::BTreeMap;

use crate::error::ConvertError;
use crate::torch::Tensor;

/// The state dict of one model, consumed as the graph is built.
pub struct ModelState<'c, 'a> {
    tensors: BTreeMap<&'c str, &'c Tensor<'a>>,
    /// For messages: which model of a bag this is.
    what: String,
}

impl<'c, 'a> ModelState<'c, 'a> {
    /// The tensors of `state` (name, tensor pairs); `what` names the model in messages.
    pub fn new(state: Vec<(&'c str, &'c Tensor<'a>)>, what: &str) -> Self {
        ModelState {
            tensors: state.into_iter().collect(),
            what: what.to_owned(),
        }
    }

    /// Takes `key` as float32 values, checking its shape.
    pub fn take(&mut self, key: &str, shape: &[usize]) -> Result<Vec<f32>, ConvertError> {
        let tensor = self.tensors.remove(key).ok_or_else(|| {
            ConvertError::Layout(format!(
                "{}: the checkpoint has no tensor {key} (of shape {shape:?}) that its kwargs \
                 call for",
                self.what
            ))
        })?;
        if tensor.shape != shape {
            return Err(ConvertError::Layout(format!(
                "{}: {key} has shape {:?}; its kwargs call for {shape:?}",
                self.what, tensor.shape
            )));
        }
        tensor.to_f32()
    }

    /// Fails when tensors are left that the graph did not use.
    pub fn finish(self) -> Result<(), ConvertError> {
        if self.tensors.is_empty() {
            return Ok(());
        }
        let names: Vec<&str> = self.tensors.keys().take(5).copied().collect();
        Err(ConvertError::Layout(format!(
            "{}: {} tensors of the checkpoint have no place in the HTDemucs its kwargs \
             describe ({}{}): it is not a model this converter understands",
            self.what,
            self.tensors.len(),
            names.join(", "),
            if self.tensors.len() > names.len() {
                ", …"
            } else {
                ""
            }
        )))
    }
}
