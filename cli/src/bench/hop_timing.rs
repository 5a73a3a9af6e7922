//! [`run_hops`]: a separator driven hop by hop as the plugin drives it, each hop timed
//! (`stemflow bench`, alone and as several instances).

use std::time::Instant;

use stemflow_engine::{PlanarBlock, Separator, SEPARATED_CHANNELS};

/// Runs `separator` hop by hop over `mix` (at its rate) and then its latency's silence; returns
/// every hop's time and the times of the hops that ran the model, in ms. Not realtime-safe.
pub(crate) fn run_hops(
    separator: &mut dyn Separator,
    mix: &[Vec<f32>; 2],
) -> Result<(Vec<f64>, Vec<f64>), String> {
    let hop = separator.info().hop_frames();
    let mut input = PlanarBlock::new(2, hop);
    let mut stems = PlanarBlock::new(SEPARATED_CHANNELS, hop);
    let mut hop_ms = Vec::new();
    let mut run_ms = Vec::new();
    let num_frames = mix[0].len() + separator.info().latency_frames();
    for start in (0..num_frames).step_by(hop) {
        let signal = start.min(mix[0].len())..(start + hop).min(mix[0].len());
        input.clear();
        for (channel, samples) in mix.iter().enumerate() {
            input.channel_mut(channel)[..signal.len()].copy_from_slice(&samples[signal.clone()]);
        }
        let runs_before = separator.model_runs();
        let t = Instant::now();
        separator
            .process_hop(&input, &mut stems)
            .map_err(|e| e.to_string())?;
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        hop_ms.push(ms);
        if separator.model_runs() > runs_before {
            run_ms.push(ms);
        }
    }
    Ok((hop_ms, run_ms))
}
