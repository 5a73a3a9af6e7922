//! [`ModelState`]: a checkpoint's tensors (an HTDemucs `state`, an MSST state dict, a Spleeter
//! checkpoint's arrays), taken one by one with their expected shapes; what is left over when the
//! graph is built is an error, so a checkpoint with layers the converter does not know is
//! refused, never half-used.

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::error::ConvertError;
use crate::torch::Tensor;

/// A tensor of a checkpoint: its shape and its values as float32 (borrowed where they already
/// are float32).
pub trait CheckpointTensor<'a> {
    /// Dimensions, outermost first.
    fn shape(&self) -> &[usize];
    /// The values, row-major.
    fn values(&self) -> Result<Cow<'a, [f32]>, ConvertError>;
}

impl<'a> CheckpointTensor<'a> for Tensor<'a> {
    fn shape(&self) -> &[usize] {
        &self.shape
    }

    fn values(&self) -> Result<Cow<'a, [f32]>, ConvertError> {
        self.to_f32().map(Cow::Owned)
    }
}

/// The state dict of one model, consumed as the graph is built.
pub struct ModelState<'c, X> {
    tensors: BTreeMap<&'c str, &'c X>,
    /// For messages: which model (of a bag) this is.
    what: String,
    /// For messages: what describes the network (`kwargs`, `config`).
    described_by: &'static str,
}

impl<'c, 'a, X: CheckpointTensor<'a>> ModelState<'c, X> {
    /// The tensors of `state` (name, tensor pairs); `what` names the model in messages and
    /// `described_by` what its shapes come from (`"kwargs"`, `"config"`).
    pub fn new(state: Vec<(&'c str, &'c X)>, what: &str, described_by: &'static str) -> Self {
        ModelState {
            tensors: state.into_iter().collect(),
            what: what.to_owned(),
            described_by,
        }
    }

    /// Whether the checkpoint has `key` (not yet taken).
    pub fn has(&self, key: &str) -> bool {
        self.tensors.contains_key(key)
    }

    /// Takes `key` as float32 values, checking its shape.
    pub fn take(&mut self, key: &str, shape: &[usize]) -> Result<Vec<f32>, ConvertError> {
        self.take_borrowed(key, shape).map(Cow::into_owned)
    }

    /// Takes `key` as float32 values, checking its shape; borrowed from the checkpoint where
    /// its values are float32 already.
    pub fn take_borrowed(
        &mut self,
        key: &str,
        shape: &[usize],
    ) -> Result<Cow<'a, [f32]>, ConvertError> {
        let tensor = self.tensors.remove(key).ok_or_else(|| {
            ConvertError::Layout(format!(
                "{}: the checkpoint has no tensor {key} (of shape {shape:?}) that its {} \
                 calls for",
                self.what, self.described_by
            ))
        })?;
        if tensor.shape() != shape {
            return Err(ConvertError::Layout(format!(
                "{}: {key} has shape {:?}; its {} calls for {shape:?}",
                self.what,
                tensor.shape(),
                self.described_by
            )));
        }
        tensor.values()
    }

    /// Takes `key` whatever its shape, dropping it (a buffer that changes nothing).
    pub fn take_any(&mut self, key: &str) -> Result<(), ConvertError> {
        self.tensors.remove(key).map(|_| ()).ok_or_else(|| {
            ConvertError::Layout(format!("{}: the checkpoint has no tensor {key}", self.what))
        })
    }

    /// Fails when tensors are left that the graph did not use.
    pub fn finish(self) -> Result<(), ConvertError> {
        if self.tensors.is_empty() {
            return Ok(());
        }
        let names: Vec<&str> = self.tensors.keys().take(5).copied().collect();
        Err(ConvertError::Layout(format!(
            "{}: {} tensors of the checkpoint have no place in the network its {} describes \
             ({}{}): it is not a model this converter understands",
            self.what,
            self.tensors.len(),
            self.described_by,
            names.join(", "),
            if self.tensors.len() > names.len() {
                ", …"
            } else {
                ""
            }
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::torch::DType;

    fn tensor(shape: &[usize]) -> Tensor<'static> {
        let bytes: Vec<u8> = (0..shape.iter().product::<usize>())
            .flat_map(|i| half::f16::from_f32(i as f32).to_le_bytes())
            .collect();
        Tensor {
            dtype: DType::F16,
            shape: shape.to_vec(),
            data: bytes.into(),
        }
    }

    #[test]
    fn tensors_are_taken_once_with_their_shape_and_leftovers_refused() {
        let (a, b) = (tensor(&[2, 3]), tensor(&[4]));
        let mut state = ModelState::new(vec![("a", &a), ("b", &b)], "HTDemucs", "kwargs");
        assert_eq!(
            state.take("a", &[2, 3]).unwrap(),
            [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        );
        let missing = state.take("a", &[2, 3]).unwrap_err().to_string();
        assert!(missing.contains("no tensor a"), "{missing}");
        let leftover = state.finish().unwrap_err().to_string();
        assert!(
            leftover.contains("1 tensors") && leftover.contains('b'),
            "{leftover}"
        );

        let mut state = ModelState::new(vec![("b", &b)], "model 2 of the bag", "kwargs");
        let shape = state.take("b", &[5]).unwrap_err().to_string();
        assert!(
            shape.contains("model 2 of the bag: b has shape [4]"),
            "{shape}"
        );
    }
}
