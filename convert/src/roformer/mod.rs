//! BS-RoFormer and Mel-RoFormer checkpoints of Music-Source-Separation-Training (MSST: a
//! state dict `.ckpt` and its YAML config) as ONNX graphs, built in Rust: no Python, no
//! PyTorch. The network is MSST's (`models/bs_roformer/bs_roformer.py`,
//! `mel_band_roformer.py`, ccc011a), which differs from lucidrains' package (Mel-RoFormer's
//! transformers end in a norm and its mask estimators have one more layer, among others).
//!
//! The graph is the contract of Stemflow's RoFormer family (`engine/src/families/roformer.rs`),
//! the STFT outside it: input `spec` `[1, 2F, frames, 2]` (the chunk's STFT, stereo interleaved
//! per bin, real and imaginary last), output `mask` `[1, stems, 2F, frames, 2]` (complex masks
//! the engine multiplies the spectrum by; Mel-RoFormer's overlapping bands already averaged).
//! The config's processing parameters are kept in the graph's metadata
//! ([`PARAMS_METADATA_KEY`]), so the model needs no sidecar.
//!
//! - [`config`]: the MSST YAML, refused by name where it asks for something not built here;
//!   [`mel`]: Mel-RoFormer's bands from librosa's mel filterbank; [`network`]: band split,
//!   transformers, mask estimators. Weights come through [`crate::state::ModelState`] (each
//!   taken once with its shape checked; leftovers refused).

mod attention;
pub mod config;
mod io;
pub mod mel;
mod network;
mod transformer;

use self::config::{RoFormerConfig, Variant};
use self::network::Network;
use crate::error::ConvertError;
use crate::ops::{Builder, Target, T};
use crate::state::ModelState;
use crate::torch::{load_torch_checkpoint, TorchCheckpoint, Value};

/// `stemflow.family` of the graphs written here.
pub const FAMILY_NAME: &str = "roformer";
/// Metadata key of the processing parameters, a JSON object with the keys a RoFormer JSON
/// sidecar takes (`n_fft`, `hop_length`, `chunk_size`, `num_overlap`, `batch_size`, `instruments`,
/// `sample_rate`, `zero_dc`).
pub const PARAMS_METADATA_KEY: &str = "stemflow.roformer.params";

/// A converted RoFormer.
#[derive(Debug, Clone, PartialEq)]
pub struct ConvertedRoFormer {
    /// The ONNX model's bytes.
    pub onnx: Vec<u8>,
    /// The stems, in the graph's output order.
    pub stems: Vec<String>,
    /// `"BS-RoFormer"` or `"Mel-RoFormer"`.
    pub variant: &'static str,
    /// Samples per model run.
    pub chunk_frames: usize,
}

/// Converts an MSST RoFormer checkpoint (the `.ckpt` bytes) with its YAML config.
///
/// BS-RoFormer or Mel-RoFormer is told by the checkpoint (BS-RoFormer has a `final_norm`).
/// Fails with [`ConvertError::Config`] naming a config key that is wrong or changes the network
/// and is not built here, [`ConvertError::Layout`] naming a missing, unused or mis-shaped
/// tensor, and
/// with the checkpoint reader's errors for a damaged or refused file. Not realtime-safe.
pub fn roformer_to_onnx(
    checkpoint: &[u8],
    config_yaml: &str,
) -> Result<ConvertedRoFormer, ConvertError> {
    roformer_to_onnx_for(checkpoint, config_yaml, Target::Cpu)
}

/// Reads and checks the MSST config `config_yaml` for `checkpoint` (whose tensors tell BS- from
/// Mel-RoFormer) without building a graph, so that a wrong config is reported as such before
/// any conversion: [`ConvertError::Config`] naming the key (the caller names the file), or the
/// checkpoint reader's errors for a damaged or refused checkpoint. Not realtime-safe.
pub fn read_config(checkpoint: &[u8], config_yaml: &str) -> Result<RoFormerConfig, ConvertError> {
    let loaded = load_torch_checkpoint(checkpoint)?;
    let tensors = loaded.state_dict(state_root(&loaded))?;
    let is_band_split = tensors.iter().any(|(name, _)| *name == "final_norm.gamma");
    RoFormerConfig::from_yaml(config_yaml, is_band_split)
}

/// The state dict of `loaded`: MSST's loader accepts a bare state dict or one under `state` /
/// `state_dict`.
fn state_root<'c>(loaded: &'c TorchCheckpoint<'_>) -> &'c Value {
    ["state_dict", "state"]
        .iter()
        .find_map(|key| loaded.root.get(key).filter(|v| v.as_dict().is_some()))
        .unwrap_or(&loaded.root)
}

/// [`roformer_to_onnx`] for `target`: the CPU graph (the STFT outside it), or a GPU graph (a
/// batch of chunks in, their stems out). Not realtime-safe.
pub fn roformer_to_onnx_for(
    checkpoint: &[u8],
    config_yaml: &str,
    target: Target,
) -> Result<ConvertedRoFormer, ConvertError> {
    let loaded = load_torch_checkpoint(checkpoint)?;
    let tensors = loaded.state_dict(state_root(&loaded))?;
    let is_band_split = tensors.iter().any(|(name, _)| *name == "final_norm.gamma");
    let config = RoFormerConfig::from_yaml(config_yaml, is_band_split)?;
    let variant = if is_band_split {
        "BS-RoFormer"
    } else {
        "Mel-RoFormer"
    };
    let state = ModelState::new(tensors, variant, "config");
    let bands = band_bins(&config)?;
    let (num_bins, frames) = (config.num_bins(), config.frames());

    let mut b = Builder::for_target("roformer", target);
    let spec = io::input_spectrum(&mut b, &config)?;
    // Each band's rows of `spec`: bin-major, both channels of a bin together.
    let rows: Vec<usize> = bands
        .iter()
        .flatten()
        .flat_map(|&bin| [2 * bin, 2 * bin + 1])
        .collect();
    let widths: Vec<usize> = bands.iter().map(|band| 4 * band.len()).collect();
    let mut net = Network {
        b: &mut b,
        state,
        config: &config,
    };
    let band_rows = match config.variant {
        Variant::BandSplit { .. } => spec.clone(),
        Variant::MelBand { .. } => net.b.gather(&spec, 1, &rows)?,
    };
    let tokens = net.band_split(&band_rows, &widths)?;
    let tokens = net.transformers(&tokens)?;
    let (final_norm, divisor, tokens) = if is_band_split {
        let dim = config.dim;
        let scale = net.norm_scale("final_norm", dim)?;
        if net.b.is_gpu() {
            let normalised = net.b.rms_norm(&tokens, None)?;
            (Some(scale), None, normalised)
        } else {
            (Some(scale), Some(net.b.l2_norm_divisor(&tokens)?), tokens)
        }
    } else {
        (None, None, tokens)
    };
    let mut masks = Vec::new();
    for stem in 0..config.num_stems {
        let mask = net.mask_estimator(
            &tokens,
            stem,
            &widths,
            final_norm.as_deref(),
            divisor.as_ref(),
        )?;
        let mask = match config.variant {
            Variant::BandSplit { .. } => {
                let mask = net.b.reshape(&mask, &[frames, 2 * num_bins, 2])?;
                net.b.transpose(&mask, &[1, 0, 2])
            }
            Variant::MelBand { .. } => average_overlaps(net.b, &mask, &rows, 2 * num_bins)?,
        };
        masks.push(net.b.reshape(&mask, &[1, 1, 2 * num_bins, frames, 2])?);
    }
    net.state.finish()?;
    let mask = b.concat(&masks, 1);
    io::output(&mut b, &config, &spec, &mask)?;
    target.write_metadata(&mut b.graph);
    b.graph
        .set_metadata(crate::htdemucs::FAMILY_METADATA_KEY, FAMILY_NAME);
    b.graph
        .set_metadata(crate::htdemucs::STEMS_METADATA_KEY, &config.stems.join(","));
    b.graph
        .set_metadata(PARAMS_METADATA_KEY, &params_json(&config).to_string());
    b.graph.validate()?;
    Ok(ConvertedRoFormer {
        onnx: b.graph.to_model_bytes(),
        stems: config.stems.clone(),
        variant,
        chunk_frames: config.chunk_frames,
    })
}

/// Each band's STFT bins.
fn band_bins(config: &RoFormerConfig) -> Result<Vec<Vec<usize>>, ConvertError> {
    Ok(match &config.variant {
        Variant::BandSplit { freqs_per_bands } => {
            let mut start = 0;
            freqs_per_bands
                .iter()
                .map(|&n| {
                    start += n;
                    (start - n..start).collect()
                })
                .collect()
        }
        Variant::MelBand {
            num_bands,
            sample_rate_hz,
        } => mel::mel_band_bins(*sample_rate_hz, config.n_fft, *num_bands)?,
    })
}

/// Mel-RoFormer's `scatter_add_` of the bands' masks `[frames, 2·rows]` onto the spectrum's
/// rows, divided by how many bands cover each: a `Gather` per overlap (the rows in the order
/// `scatter_add_` adds them, a zero row where a bin has fewer bands), summed. Gives
/// `[2F, frames, 2]`.
fn average_overlaps(
    b: &mut Builder<'_>,
    mask: &T,
    rows: &[usize],
    num_rows: usize,
) -> Result<T, ConvertError> {
    let frames = mask.shape[0];
    let mut sources: Vec<Vec<usize>> = vec![Vec::new(); num_rows];
    for (position, &row) in rows.iter().enumerate() {
        sources[row].push(position);
    }
    let mask = b.reshape(mask, &[frames, rows.len(), 2])?;
    let mask = b.transpose(&mask, &[1, 0, 2]);
    let padded = if b.is_gpu() {
        // A zero row per item of the batch.
        b.pad(&mask, 0, (0, 1), None)?
    } else {
        let zero = b.constant("zero_mask_row", &[1, frames, 2], vec![0.0; frames * 2])?;
        b.concat(&[mask, zero], 0)
    };
    let most = sources.iter().map(Vec::len).max().unwrap_or(0);
    let mut sum: Option<T> = None;
    for slot in 0..most {
        let indices: Vec<usize> = sources
            .iter()
            .map(|s| s.get(slot).copied().unwrap_or(rows.len()))
            .collect();
        let part = b.gather(&padded, 0, &indices)?;
        sum = Some(match sum {
            None => part,
            Some(total) => b.binary("Add", &total, &part),
        });
    }
    let sum = sum.ok_or_else(|| ConvertError::Layout("internal: no mel bands".into()))?;
    let counts: Vec<f32> = sources.iter().map(|s| (s.len() as f32).max(1e-8)).collect();
    let counts = b.constant("bands_per_bin", &[num_rows, 1, 1], counts)?;
    Ok(b.binary("Div", &sum, &counts))
}

/// The processing parameters kept in the graph (the keys of a RoFormer JSON sidecar).
fn params_json(config: &RoFormerConfig) -> serde_json::Value {
    let mut params = serde_json::json!({
        "n_fft": config.n_fft,
        "hop_length": config.hop_frames,
        "chunk_size": config.chunk_frames,
        "instruments": config.stems,
        "sample_rate": config.sample_rate_hz,
        "zero_dc": config.zero_dc,
    });
    if let Some(num_overlap) = config.num_overlap {
        params["num_overlap"] = num_overlap.into();
    }
    if let Some(batch_size) = config.batch_size {
        params["batch_size"] = batch_size.into();
    }
    params
}

#[cfg(test)]
mod tests {
    use stemflow_onnx::kernels::{check_gpu_graph, inspect, Provider};

    use super::*;
    use crate::ops::Precision;

    fn fixture(name: &str) -> Vec<u8> {
        crate::testing::fixture(&format!("roformer/{name}"))
    }

    #[test]
    fn gpu_graphs_run_wholly_on_cuda_and_directml_without_float64_and_with_fewer_nodes() {
        for name in ["bs_tiny", "mel_tiny"] {
            let checkpoint = fixture(&format!("{name}.ckpt"));
            let yaml = String::from_utf8(fixture(&format!("{name}.yaml"))).unwrap();
            let cpu = roformer_to_onnx(&checkpoint, &yaml).unwrap();
            let cpu_nodes = inspect(&cpu.onnx, Provider::Cuda).unwrap().node_count;
            for precision in [Precision::Float32, Precision::Float16] {
                let gpu = roformer_to_onnx_for(&checkpoint, &yaml, Target::Gpu(precision)).unwrap();
                if let Err(problems) = check_gpu_graph(&gpu.onnx) {
                    panic!("{name} {precision:?}:\n{problems}");
                }
                let report = inspect(&gpu.onnx, Provider::Cuda).unwrap();
                let casts = report.ops.get("Cast").copied().unwrap_or(0);
                println!(
                    "{name} {precision:?}: {} nodes ({cpu_nodes} on the CPU), {casts} Casts",
                    report.node_count
                );
                // Blocks and the folded norms' divisions gone, the masking and the inverse
                // STFT added: fewer nodes even at this size (many fewer at released sizes).
                assert!(report.node_count < cpu_nodes, "{name} {precision:?}");
                // Float16: in and out of the float32 parts (spectrum, the linear attention's
                // norms and softmax), not around every operator.
                let most = match precision {
                    Precision::Float32 => 0,
                    Precision::Float16 => 16,
                };
                assert!(casts <= most, "{name} {precision:?}: {casts} Casts");
            }
        }
    }
}
