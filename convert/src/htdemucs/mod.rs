//! HTDemucs (demucs v4) checkpoints as ONNX graphs, built in Rust from each checkpoint's
//! `kwargs` and float16 `state`: no Python, no PyTorch.
//!
//! The graph is HTDemucs' network with the STFT outside it, as Stemflow's RoFormer family
//! runs: inputs `mix` `[1, 2, T]` (the waveform) and `spec` `[1, 4, nfft/2, frames]` (its
//! normalised STFT as demucs' `_spec` computes it, complex as channels: left real, left
//! imaginary, right real, right imaginary); outputs `wave_stems` `[1, S, 2, T]` (the time
//! branch) and `spec_stems` `[1, S, 4, nfft/2, frames]` (the spectrogram branch). The engine
//! adds the inverse STFT of `spec_stems` to `wave_stems`, which is `HTDemucs.forward`'s
//! output. Doing the transforms in Rust's FFT instead of ONNX's DFT operators makes a run
//! about two seconds faster on a 2-core CPU and keeps 100 MB of complex buffers out of the
//! graph.
//!
//! A bag of models (`htdemucs_ft`: four models, each serving one stem) becomes one graph whose
//! models share the inputs and whose stems are combined by the bag's weights, as demucs'
//! `apply_model` combines them: one run per chunk.
//!
//! - [`config`]: the hyper-parameters, refused with a reason when they ask for something not
//!   built here; [`network`]: the encoders, decoders and DConv branches; [`transformer`]: the
//!   cross-transformer. The weights are taken with [`crate::state::ModelState`] (each once,
//!   its shape checked, leftovers refused) and the graph built with [`crate::ops::Builder`].

pub mod config;
mod io;
mod network;
mod transformer;

use self::config::HtDemucsConfig;
use self::network::{build_network, normalise, Inputs};
use crate::error::ConvertError;
use crate::ops::{Builder, Target, T};
use crate::state::ModelState;
use crate::torch::load_torch_checkpoint;

/// `stemflow.family` of the graphs written here.
pub const FAMILY_NAME: &str = "htdemucs";
/// Metadata key of the family.
pub const FAMILY_METADATA_KEY: &str = "stemflow.family";
/// Metadata key of the stems, comma-separated in output order.
pub const STEMS_METADATA_KEY: &str = "stemflow.stems";
/// Metadata key of the FFT size.
pub const NFFT_METADATA_KEY: &str = "stemflow.htdemucs.nfft";

/// A converted demucs model (one checkpoint, or a bag of them).
#[derive(Debug, Clone, PartialEq)]
pub struct ConvertedDemucs {
    /// The ONNX model's bytes.
    pub onnx: Vec<u8>,
    /// The stems, in the graph's output order (demucs' `sources`).
    pub sources: Vec<String>,
    /// Frames per model run (`int(segment × samplerate)`).
    pub segment_frames: usize,
}

/// Converts demucs checkpoints (the bytes of each `.th`, in the bag's order) into one ONNX
/// model; `weights` are the bag's (row `m` weighs model `m`'s stems; `None`: all ones).
///
/// Fails with [`ConvertError::Layout`] naming what it does not understand (a class that is
/// not `HTDemucs`, an option that changes the network and is not built here, a missing,
/// unused or mis-shaped tensor, models of a bag that disagree), and with the checkpoint
/// reader's errors for a damaged or refused file. Not realtime-safe.
pub fn demucs_to_onnx(
    checkpoints: &[&[u8]],
    weights: Option<&[&[f32]]>,
) -> Result<ConvertedDemucs, ConvertError> {
    demucs_to_onnx_for(checkpoints, weights, Target::Cpu)
}

/// [`demucs_to_onnx`] for `target`: the CPU graph (the STFT outside it), or a GPU graph (a
/// batch of waveforms in, their stems out). Not realtime-safe.
pub fn demucs_to_onnx_for(
    checkpoints: &[&[u8]],
    weights: Option<&[&[f32]]>,
    target: Target,
) -> Result<ConvertedDemucs, ConvertError> {
    if checkpoints.is_empty() || checkpoints.len() > 16 {
        return Err(ConvertError::Layout(format!(
            "a bag of demucs models has 1 to 16 checkpoints, not {}",
            checkpoints.len()
        )));
    }
    let num_models = checkpoints.len();
    let what = |m: usize| {
        if num_models == 1 {
            "HTDemucs".to_owned()
        } else {
            format!("model {} of the bag", m + 1)
        }
    };
    let loaded = checkpoints
        .iter()
        .enumerate()
        .map(|(m, bytes)| load_torch_checkpoint(bytes).map_err(|e| prefix_error(&what(m), e)))
        .collect::<Result<Vec<_>, _>>()?;
    let configs = loaded
        .iter()
        .enumerate()
        .map(|(m, c)| HtDemucsConfig::from_package(&c.root).map_err(|e| prefix_error(&what(m), e)))
        .collect::<Result<Vec<_>, _>>()?;
    let first = &configs[0];
    for (m, config) in configs.iter().enumerate().skip(1) {
        if config.sources != first.sources
            || config.segment_frames != first.segment_frames
            || config.nfft != first.nfft
        {
            return Err(ConvertError::Layout(format!(
                "{} separates {:?} in segments of {} frames with nfft {}; model 1 {:?}, {}, {}: \
                 a bag's models must agree",
                what(m),
                config.sources,
                config.segment_frames,
                config.nfft,
                first.sources,
                first.segment_frames,
                first.nfft
            )));
        }
    }
    let num_sources = first.sources.len();
    let coefficients = bag_coefficients(weights, num_models, num_sources)?;

    let mut b = Builder::for_target("htdemucs", target);
    let (mix, spec) = io::inputs(&mut b, first)?;
    let (spec, spec_mean, spec_std) = normalise(&mut b, &spec)?;
    let (mix, mix_mean, mix_std) = normalise(&mut b, &mix)?;
    let inputs = Inputs {
        spec,
        spec_mean,
        spec_std,
        mix,
        mix_mean,
        mix_std,
    };
    let mut outputs: Option<(T, T)> = None;
    for (m, (checkpoint, config)) in loaded.iter().zip(&configs).enumerate() {
        let state_value = checkpoint.root.get("state").ok_or_else(|| {
            ConvertError::Layout(format!("{}: the package has no state", what(m)))
        })?;
        let state = checkpoint
            .state_dict(state_value)
            .map_err(|e| prefix_error(&what(m), e))?;
        let state = ModelState::new(state, &what(m), "kwargs");
        let prefix = if num_models == 1 {
            String::new()
        } else {
            format!("model{m}/")
        };
        let (spec_m, wave_m) = build_network(&mut b, state, config, &prefix, &inputs)?;
        let (spec_m, wave_m) = match &coefficients {
            None => (spec_m, wave_m),
            Some(rows) => {
                let row = rows[m].clone();
                let c5 = b.constant_f32("bag_weight", &[1, num_sources, 1, 1, 1], row.clone())?;
                let c4 = b.constant_f32("bag_weight", &[1, num_sources, 1, 1], row)?;
                (b.binary("Mul", &spec_m, &c5), b.binary("Mul", &wave_m, &c4))
            }
        };
        outputs = Some(match outputs {
            None => (spec_m, wave_m),
            Some((spec_sum, wave_sum)) => (
                b.binary("Add", &spec_sum, &spec_m),
                b.binary("Add", &wave_sum, &wave_m),
            ),
        });
    }
    let (spec_out, wave_out) = outputs.expect("at least one model");
    io::outputs(&mut b, first, &spec_out, &wave_out)?;
    target.write_metadata(&mut b.graph);
    b.graph.set_metadata(FAMILY_METADATA_KEY, FAMILY_NAME);
    b.graph
        .set_metadata(STEMS_METADATA_KEY, &first.sources.join(","));
    b.graph
        .set_metadata(NFFT_METADATA_KEY, &first.nfft.to_string());
    b.graph.validate()?;
    Ok(ConvertedDemucs {
        onnx: b.graph.to_model_bytes(),
        sources: first.sources.clone(),
        segment_frames: first.segment_frames,
    })
}

/// Each model's factor per stem, `weight / total weight of the stem` (`None` for one model
/// with no weights: nothing to combine).
fn bag_coefficients(
    weights: Option<&[&[f32]]>,
    num_models: usize,
    num_sources: usize,
) -> Result<Option<Vec<Vec<f32>>>, ConvertError> {
    let rows: Vec<Vec<f64>> = match weights {
        None if num_models == 1 => return Ok(None),
        None => vec![vec![1.0; num_sources]; num_models],
        Some(rows) => {
            if rows.len() != num_models || rows.iter().any(|r| r.len() != num_sources) {
                return Err(ConvertError::Layout(format!(
                    "the bag's weights must be {num_models} rows of {num_sources}"
                )));
            }
            rows.iter()
                .map(|r| r.iter().map(|&w| f64::from(w)).collect())
                .collect()
        }
    };
    let mut coefficients = vec![vec![0.0f32; num_sources]; num_models];
    for s in 0..num_sources {
        let total: f64 = rows.iter().map(|r| r[s]).sum();
        let valid = |w: f64| w.is_finite() && w >= 0.0;
        if total <= 0.0 || !rows.iter().all(|r| valid(r[s])) {
            return Err(ConvertError::Layout(format!(
                "the bag's weights for stem {} must be ≥ 0 with a positive sum",
                s + 1
            )));
        }
        for (m, row) in rows.iter().enumerate() {
            coefficients[m][s] = (row[s] / total) as f32;
        }
    }
    Ok(Some(coefficients))
}

fn prefix_error(what: &str, error: ConvertError) -> ConvertError {
    match error {
        ConvertError::Layout(m) => ConvertError::Layout(format!("{what}: {m}")),
        ConvertError::Pickle(m) => ConvertError::Pickle(format!("{what}: {m}")),
        ConvertError::Zip(m) => ConvertError::Zip(format!("{what}: {m}")),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use stemflow_onnx::kernels::{check_gpu_graph, inspect, Provider};

    use super::*;
    use crate::ops::Precision;

    fn fixture(name: &str) -> Vec<u8> {
        crate::testing::fixture(&format!("htdemucs/{name}"))
    }

    /// (nodes, casts) of a graph.
    fn counts(onnx: &[u8]) -> (usize, usize) {
        let report = inspect(onnx, Provider::Cuda).unwrap();
        (
            report.node_count,
            report.ops.get("Cast").copied().unwrap_or(0),
        )
    }

    #[test]
    fn gpu_graphs_run_wholly_on_cuda_and_directml_without_float64_and_with_few_nodes() {
        for name in ["small.th", "small6.th"] {
            let bytes = fixture(name);
            let cpu = demucs_to_onnx(&[&bytes], None).unwrap();
            let (cpu_nodes, cpu_casts) = counts(&cpu.onnx);
            for precision in [Precision::Float32, Precision::Float16] {
                let gpu = demucs_to_onnx_for(&[&bytes], None, Target::Gpu(precision)).unwrap();
                if let Err(problems) = check_gpu_graph(&gpu.onnx) {
                    panic!("{name} {precision:?}:\n{problems}");
                }
                let (nodes, casts) = counts(&gpu.onnx);
                println!(
                    "{name} {precision:?}: {nodes} nodes ({cpu_nodes} on the CPU), {casts} Casts \
                     ({cpu_casts})"
                );
                assert!(nodes * 3 < cpu_nodes, "{nodes} nodes against {cpu_nodes}");
                let norms =
                    inspect(&gpu.onnx, Provider::Cuda).unwrap().ops["InstanceNormalization"];
                match precision {
                    Precision::Float32 => assert_eq!(casts, 0),
                    // Around each norm, and the network's input and outputs.
                    Precision::Float16 => assert!(casts <= 2 * norms + 4, "{casts} Casts"),
                }
            }
        }
    }
}
