//! The RoFormer network (MSST `models/bs_roformer/bs_roformer.py` and `mel_band_roformer.py`):
//! band split, the axial transformers, the mask estimators.
//!
//! Tokens stay bands-major, `[bands, frames, dim]`, for the whole network: a time transformer
//! attends along axis 1 and a frequency transformer along axis 0, and the permutation each
//! needs is folded into the transposes that split heads off anyway, so the activations are
//! never transposed between transformers (MSST rearranges `b t f d` twice per block). Each
//! RMSNorm followed by a linear layer (every norm but the Mel-RoFormer transformers' output
//! norms) is folded into that layer's weights: `normalize(x)·√d·γ @ W = (x @ (√d·γ·W)) / ‖x‖`.

use super::config::{RoFormerConfig, Variant};
use crate::error::ConvertError;
use crate::ops::{Builder, T};
use crate::state::ModelState;
use crate::torch::Tensor;

/// The graph under construction with the checkpoint's tensors and the config.
pub(super) struct Network<'n, 'g, 'c, 'a> {
    /// The graph.
    pub b: &'n mut Builder<'g>,
    /// The tensors, each taken once.
    pub state: ModelState<'c, Tensor<'a>>,
    /// The hyper-parameters.
    pub config: &'n RoFormerConfig,
}

/// `weight` `[out, in]` transposed to `[in, out]`, each input row scaled by `scale[in]`.
pub(super) fn transposed(
    weight: &[f32],
    out: usize,
    input: usize,
    scale: Option<&[f32]>,
) -> Vec<f32> {
    let mut values = vec![0.0f32; out * input];
    for o in 0..out {
        for i in 0..input {
            let factor = scale.map_or(1.0, |s| s[i]);
            values[i * out + o] = weight[o * input + i] * factor;
        }
    }
    values
}

/// Consecutive runs of equal sizes: `(first index, count, size)`.
pub(super) fn runs(sizes: &[usize]) -> Vec<(usize, usize, usize)> {
    let mut runs: Vec<(usize, usize, usize)> = Vec::new();
    for (index, &size) in sizes.iter().enumerate() {
        match runs.last_mut() {
            Some((_, count, last)) if *last == size => *count += 1,
            _ => runs.push((index, 1, size)),
        }
    }
    runs
}

impl Network<'_, '_, '_, '_> {
    /// Takes `key` with `shape`.
    pub(super) fn take(&mut self, key: &str, shape: &[usize]) -> Result<Vec<f32>, ConvertError> {
        self.state.take(key, shape)
    }

    /// An RMSNorm's `√dim · γ` (`key` is the norm's prefix).
    pub(super) fn norm_scale(&mut self, key: &str, dim: usize) -> Result<Vec<f32>, ConvertError> {
        // `SimplifiedLayerNormalization` (GPU graphs) multiplies by √dim itself.
        let scale = match self.b.is_gpu() {
            true => 1.0,
            false => (dim as f64).sqrt() as f32,
        };
        Ok(self
            .take(&format!("{key}.gamma"), &[dim])?
            .into_iter()
            .map(|g| scale * g)
            .collect())
    }

    /// `x / max(‖x‖, eps) · √dim · γ`: an RMSNorm that is not followed by a linear layer.
    pub(super) fn rms_norm(&mut self, x: &T, key: &str) -> Result<T, ConvertError> {
        let dim = *x.shape.last().expect("tokens");
        let scale = self.norm_scale(key, dim)?;
        if self.b.is_gpu() {
            let scale = self.b.weight(&format!("{key}.scale"), &[dim], scale)?;
            return self.b.rms_norm(x, Some(&scale));
        }
        let divisor = self.b.l2_norm_divisor(x)?;
        let normalised = self.b.binary("Div", x, &divisor);
        let scale = self.b.weight(&format!("{key}.scale"), &[dim], scale)?;
        Ok(self.b.binary("Mul", &normalised, &scale))
    }

    /// `RMSNorm(x) @ weight` for a `weight` whose rows carry the norm's scale
    /// ([`Network::norm_scale`]): on the CPU `(x @ weight) / ‖x‖` (the norm folded into the
    /// product), on GPUs `x` normalised first (float32 statistics; a float16 product of raw
    /// spectrum values would overflow).
    pub(super) fn normed_matmul(&mut self, x: &T, weight: &T) -> Result<T, ConvertError> {
        if self.b.is_gpu() {
            let normalised = self.b.rms_norm(x, None)?;
            return self.b.matmul(&normalised, weight);
        }
        let divisor = self.b.l2_norm_divisor(x)?;
        let product = self.b.matmul(x, weight)?;
        Ok(self.b.binary("Div", &product, &divisor))
    }

    /// The band split: `[1, features, frames, 2]` spectrum rows (already gathered into band
    /// order) to tokens `[bands, frames, dim]`; `widths` are the bands' input features.
    pub fn band_split(&mut self, rows: &T, widths: &[usize]) -> Result<T, ConvertError> {
        let (features, frames) = (rows.shape[1], rows.shape[2]);
        let dim = self.config.dim;
        // 'b f t c -> b t (f c)'
        let x = self.b.transpose(rows, &[0, 2, 1, 3]);
        let x = self.b.reshape(&x, &[frames, features * 2])?;
        let mut groups = Vec::new();
        let mut offset = 0;
        for (first, count, width) in runs(widths) {
            let part = self.b.slice(&x, 1, offset, offset + count * width)?;
            offset += count * width;
            let part = if count == 1 {
                self.b.reshape(&part, &[1, frames, width])?
            } else {
                let part = self.b.reshape(&part, &[frames, count, width])?;
                self.b.transpose(&part, &[1, 0, 2])
            };
            let (mut weights, mut biases) = (Vec::new(), Vec::new());
            for band in first..first + count {
                let key = format!("band_split.to_features.{band}");
                let scale = self.norm_scale(&format!("{key}.0"), width)?;
                let weight = self.take(&format!("{key}.1.weight"), &[dim, width])?;
                weights.extend(transposed(&weight, dim, width, Some(&scale)));
                biases.extend(self.take(&format!("{key}.1.bias"), &[dim])?);
            }
            let name = format!("band_split.{first}");
            let weight = self
                .b
                .weight(&format!("{name}.weight"), &[count, width, dim], weights)?;
            let bias = self
                .b
                .weight(&format!("{name}.bias"), &[count, 1, dim], biases)?;
            let projected = self.normed_matmul(&part, &weight)?;
            groups.push(self.b.binary("Add", &projected, &bias));
        }
        Ok(self.b.concat(&groups, 0))
    }

    /// One stem's mask estimator (`mask_estimators.{stem}`) on tokens `[bands, frames, dim]`
    /// (BS-RoFormer's `final_norm` folded into its first layer): the masks of each band's
    /// features, `[frames, Σ widths]`.
    pub fn mask_estimator(
        &mut self,
        x: &T,
        stem: usize,
        widths: &[usize],
        final_norm: Option<&[f32]>,
        divisor: Option<&T>,
    ) -> Result<T, ConvertError> {
        let (bands, frames, dim) = (x.shape[0], x.shape[1], x.shape[2]);
        let hidden = dim * self.config.mlp_expansion_factor;
        // MLP(dim, 2·width, hidden, depth): BS has depth linear layers, Mel depth + 1.
        let num_layers = match self.config.variant {
            Variant::BandSplit { .. } => self.config.mask_estimator_depth,
            Variant::MelBand { .. } => self.config.mask_estimator_depth + 1,
        };
        let key = |band: usize, layer: usize| {
            format!("mask_estimators.{stem}.to_freqs.{band}.0.{}", 2 * layer)
        };
        let mut h = x.clone();
        for layer in 0..num_layers - 1 {
            let input = if layer == 0 { dim } else { hidden };
            let (mut weights, mut biases) = (Vec::new(), Vec::new());
            for band in 0..bands {
                let w = self.take(&format!("{}.weight", key(band, layer)), &[hidden, input])?;
                let scale = if layer == 0 { final_norm } else { None };
                weights.extend(transposed(&w, hidden, input, scale));
                biases.extend(self.take(&format!("{}.bias", key(band, layer)), &[hidden])?);
            }
            let name = format!("mask_estimators.{stem}.layer{layer}");
            let w = self
                .b
                .weight(&format!("{name}.weight"), &[bands, input, hidden], weights)?;
            let bias = self
                .b
                .weight(&format!("{name}.bias"), &[bands, 1, hidden], biases)?;
            h = self.b.matmul(&h, &w)?;
            if let (0, Some(divisor)) = (layer, divisor) {
                h = self.b.binary("Div", &h, divisor);
            }
            h = self.b.binary("Add", &h, &bias);
            h = self.b.unary("Tanh", &h);
        }
        let last = num_layers - 1;
        let input = if last == 0 { dim } else { hidden };
        let mut outputs = Vec::new();
        for (first, count, width) in runs(widths) {
            let (mut weights, mut biases) = (Vec::new(), Vec::new());
            for band in first..first + count {
                let w = self.take(&format!("{}.weight", key(band, last)), &[2 * width, input])?;
                let scale = if last == 0 { final_norm } else { None };
                weights.extend(transposed(&w, 2 * width, input, scale));
                biases.extend(self.take(&format!("{}.bias", key(band, last)), &[2 * width])?);
            }
            let name = format!("mask_estimators.{stem}.out{first}");
            let w = self.b.weight(
                &format!("{name}.weight"),
                &[count, input, 2 * width],
                weights,
            )?;
            let bias = self
                .b
                .weight(&format!("{name}.bias"), &[count, 1, 2 * width], biases)?;
            let part = if count == bands {
                h.clone()
            } else {
                self.b.slice(&h, 0, first, first + count)?
            };
            let mut y = self.b.matmul(&part, &w)?;
            if let (0, Some(divisor)) = (last, divisor) {
                let cut = if count == bands {
                    divisor.clone()
                } else {
                    self.b.slice(divisor, 0, first, first + count)?
                };
                y = self.b.binary("Div", &y, &cut);
            }
            let y = self.b.binary("Add", &y, &bias);
            let y = self.b.glu(&y, 2);
            let y = if count == 1 {
                self.b.reshape(&y, &[frames, width])?
            } else {
                let y = self.b.transpose(&y, &[1, 0, 2]);
                self.b.reshape(&y, &[frames, count * width])?
            };
            outputs.push(y);
        }
        Ok(self.b.concat(&outputs, 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_group_equal_neighbours() {
        assert_eq!(runs(&[2, 2, 4, 4, 4, 2]), [(0, 2, 2), (2, 3, 4), (5, 1, 2)]);
        assert!(runs(&[]).is_empty());
    }

    #[test]
    fn weights_are_transposed_with_their_input_scale() {
        // [[1, 2, 3], [4, 5, 6]] (out 2, in 3), inputs scaled by 1, 10, 100.
        let t = transposed(
            &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            2,
            3,
            Some(&[1.0, 10.0, 100.0]),
        );
        assert_eq!(t, [1.0, 4.0, 20.0, 50.0, 300.0, 600.0]);
    }
}
