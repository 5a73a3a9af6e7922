//! A Spleeter checkpoint's arrays ([`Tensor`], [`TensorMap`]) and their check: the channel
//! counts read from the shapes, each array the network uses present, finite and of the shape its
//! neighbours imply ([`unet_channels`]).

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::{INPUT_CHANNELS, MASK_KERNEL, NUM_STAGES, STRIDED_KERNEL};
use crate::error::ConvertError;
use crate::state::CheckpointTensor;

/// One array of a checkpoint, borrowed: its shape (outermost first) and its row-major values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tensor<'a> {
    /// Dimensions, outermost first (PyTorch layouts: Conv2d `[out, in, kh, kw]`,
    /// ConvTranspose2d `[in, out, kh, kw]`).
    pub shape: &'a [usize],
    /// Values, row-major; `shape`'s product of them.
    pub data: &'a [f32],
}

/// A stem's checkpoint: its arrays by key (`"down1_conv.1.weight"`, …). Keys the network does
/// not use (such as `down6_act.0.*`) are ignored. Build one from the pickle's arrays with
/// `arrays.iter().map(|(k, a)| (k.as_str(), Tensor { shape: &a.shape, data: &a.data }))`.
pub type TensorMap<'a> = BTreeMap<&'a str, Tensor<'a>>;

/// A U-Net's channel counts, read from its checkpoint's shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnetChannels {
    /// Output channels of `down1` … `down6` (published: 16, 32, 64, 128, 256, 512).
    pub encoder: [usize; NUM_STAGES],
    /// Output channels of `up1` … `up6` (published: 256, 128, 64, 32, 16, 1).
    pub decoder: [usize; NUM_STAGES],
}

/// Reads a stem's channel counts from its checkpoint and checks every array the network uses:
/// present, of the shape the neighbouring layers imply, finite, with non-negative
/// `running_var`. Errors name the stem and the key.
pub fn unet_channels(stem: &str, tensors: &TensorMap<'_>) -> Result<UnetChannels, ConvertError> {
    const K: usize = STRIDED_KERNEL;
    let weights = Weights { stem, tensors };
    let mut encoder = [0; NUM_STAGES];
    let mut in_channels = INPUT_CHANNELS;
    for (i, channels) in encoder.iter_mut().enumerate() {
        let stage = i + 1;
        let key = format!("down{stage}_conv.1.weight");
        *channels = weights.derived_dim(&key, 0, &[None, Some(in_channels), Some(K), Some(K)])?;
        weights.get(&format!("down{stage}_conv.1.bias"), &[*channels])?;
        if stage < NUM_STAGES {
            weights.batch_norm(&format!("down{stage}_act.0"), *channels)?;
        }
        in_channels = *channels;
    }
    let mut decoder = [0; NUM_STAGES];
    for i in 0..NUM_STAGES {
        let stage = i + 1;
        let in_channels = match i {
            0 => encoder[NUM_STAGES - 1],
            _ => encoder[NUM_STAGES - 1 - i] + decoder[i - 1],
        };
        let key = format!("up{stage}.0.weight");
        decoder[i] = weights.derived_dim(&key, 1, &[Some(in_channels), None, Some(K), Some(K)])?;
        weights.get(&format!("up{stage}.0.bias"), &[decoder[i]])?;
        weights.batch_norm(&format!("up{stage}.3"), decoder[i])?;
    }
    let mask_in = decoder[NUM_STAGES - 1];
    weights.get(
        "up7.0.weight",
        &[INPUT_CHANNELS, mask_in, MASK_KERNEL, MASK_KERNEL],
    )?;
    weights.get("up7.0.bias", &[INPUT_CHANNELS])?;
    Ok(UnetChannels { encoder, decoder })
}

/// A stem's arrays with the stem's name, for error messages.
struct Weights<'m, 'a> {
    stem: &'m str,
    tensors: &'m TensorMap<'a>,
}

impl<'a> Weights<'_, 'a> {
    /// The array `key`, checked against `shape`.
    fn get(&self, key: &str, shape: &[usize]) -> Result<Tensor<'a>, ConvertError> {
        let pattern: Vec<Option<usize>> = shape.iter().map(|&d| Some(d)).collect();
        let tensor = self.lookup(key)?;
        self.check(key, &tensor, &pattern)?;
        Ok(tensor)
    }

    /// Dimension `axis` of array `key`, whose other dimensions must be `pattern`'s (`None`
    /// marks the one read). Fails when the array has another rank or the dimension is zero.
    fn derived_dim(
        &self,
        key: &str,
        axis: usize,
        pattern: &[Option<usize>],
    ) -> Result<usize, ConvertError> {
        let tensor = self.lookup(key)?;
        self.check(key, &tensor, pattern)?;
        let dim = tensor.shape[axis];
        if dim == 0 {
            return Err(self.error(format!(
                "{key} has shape {:?}: a layer without channels",
                tensor.shape
            )));
        }
        Ok(dim)
    }

    /// Batch normalisation's four arrays `<prefix>.{weight,bias,running_mean,running_var}`.
    fn batch_norm(&self, prefix: &str, channels: usize) -> Result<(), ConvertError> {
        for part in ["weight", "bias", "running_mean"] {
            self.get(&format!("{prefix}.{part}"), &[channels])?;
        }
        let key = format!("{prefix}.running_var");
        let variance = self.get(&key, &[channels])?;
        if variance.data.iter().any(|v| *v < 0.0) {
            return Err(self.error(format!("{key} has a negative variance")));
        }
        Ok(())
    }

    fn lookup(&self, key: &str) -> Result<Tensor<'a>, ConvertError> {
        self.tensors
            .get(key)
            .copied()
            .ok_or_else(|| self.error(format!("missing {key}")))
    }

    fn check(
        &self,
        key: &str,
        tensor: &Tensor<'_>,
        pattern: &[Option<usize>],
    ) -> Result<(), ConvertError> {
        let fits = tensor.shape.len() == pattern.len()
            && tensor
                .shape
                .iter()
                .zip(pattern)
                .all(|(d, p)| p.is_none_or(|p| p == *d));
        if !fits {
            let expected: Vec<String> = pattern
                .iter()
                .enumerate()
                .map(|(axis, p)| match (p, tensor.shape.get(axis)) {
                    (Some(d), _) => d.to_string(),
                    (None, Some(d)) if tensor.shape.len() == pattern.len() => d.to_string(),
                    (None, _) => "_".to_owned(),
                })
                .collect();
            return Err(self.error(format!(
                "{key} has shape {:?}, expected [{}]",
                tensor.shape,
                expected.join(", ")
            )));
        }
        let num_values: usize = tensor.shape.iter().product();
        if tensor.data.len() != num_values {
            return Err(self.error(format!(
                "{key} has {} values, its shape {:?} needs {num_values}",
                tensor.data.len(),
                tensor.shape
            )));
        }
        if tensor.data.iter().any(|v| !v.is_finite()) {
            return Err(self.error(format!("{key} holds a NaN or an infinity")));
        }
        Ok(())
    }

    fn error(&self, message: String) -> ConvertError {
        ConvertError::Layout(format!("{}: {message}", self.stem))
    }
}

impl<'a> CheckpointTensor<'a> for Tensor<'a> {
    fn shape(&self) -> &[usize] {
        self.shape
    }

    fn values(&self) -> Result<Cow<'a, [f32]>, ConvertError> {
        Ok(Cow::Borrowed(self.data))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{tensor_map, tiny_unet_arrays};
    use super::*;

    #[test]
    fn channels_are_read_from_the_shapes() {
        let arrays = tiny_unet_arrays(3, 4);
        let channels = unet_channels("vocals", &tensor_map(&arrays)).unwrap();
        assert_eq!(channels.encoder, [4; 6]);
        assert_eq!(channels.decoder, [4, 4, 4, 4, 4, 1]);
    }
}
