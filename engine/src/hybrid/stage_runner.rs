//! [`StageRunner`]: one separator of a route or an ensemble, run over a longer hop than its own
//! (the least common multiple of every separator's hop), and [`combined_info`]: what the
//! separators of such a combination share.

use crate::dsp::gcd;
use crate::planar::PlanarBlock;
use crate::separator::{Separator, SeparatorError, SeparatorInfo, SEPARATED_CHANNELS};
use crate::stem::Stem;

/// Largest hop a combination accepts (the least common multiple of its separators' hops).
const MAX_HOP_FRAMES: usize = 1 << 18;

/// A separator and its own hop's input and stems.
pub(crate) struct StageRunner {
    pub(crate) separator: Box<dyn Separator>,
    input: PlanarBlock,
    stems: PlanarBlock,
}

impl StageRunner {
    /// Not realtime-safe: allocates one hop of input and stems.
    pub(crate) fn new(separator: Box<dyn Separator>) -> Self {
        let hop = separator.info().hop_frames().max(1);
        Self {
            input: PlanarBlock::new(2, hop),
            stems: PlanarBlock::new(SEPARATED_CHANNELS, hop),
            separator,
        }
    }

    /// Separates the first `frames` frames of `input` (a whole number of the separator's hops)
    /// hop after hop into the first `frames` frames of `stems`. Every hop runs; the first error
    /// is returned. Realtime-safe as the separator is.
    pub(crate) fn run(
        &mut self,
        input: &PlanarBlock,
        frames: usize,
        stems: &mut PlanarBlock,
    ) -> Result<(), SeparatorError> {
        let hop = self.input.num_frames();
        let mut first_error = None;
        for start in (0..frames).step_by(hop) {
            for channel in 0..2 {
                self.input
                    .channel_mut(channel)
                    .copy_from_slice(&input.channel(channel)[start..start + hop]);
            }
            if let Err(error) = self.separator.process_hop(&self.input, &mut self.stems) {
                first_error.get_or_insert(error);
            }
            for channel in 0..SEPARATED_CHANNELS {
                stems.channel_mut(channel)[start..start + hop]
                    .copy_from_slice(self.stems.channel(channel));
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// The [`Separator`] methods every combination of separators (a route, an ensemble) answers the
/// same way: its info (its field `info`), and for all its separators together their model runs
/// (the sum), requests and events (handed to and collected from each), and its device (the
/// first that has one). Written inside the combination's `impl Separator`; `$parts` names its
/// field whose items each hold a `runner: StageRunner`.
macro_rules! combined_separator_methods {
    ($parts:ident) => {
        fn info(&self) -> &$crate::separator::SeparatorInfo {
            &self.info
        }

        fn model_runs(&self) -> u64 {
            self.$parts
                .iter()
                .map(|part| part.runner.separator.model_runs())
                .sum()
        }

        fn request(&mut self, request: $crate::separator::SeparatorRequest) {
            for part in &mut self.$parts {
                part.runner.separator.request(request.clone());
            }
        }

        fn poll_events(&mut self, events: &mut dyn FnMut($crate::runtime::devices::DeviceEvent)) {
            for part in &mut self.$parts {
                part.runner.separator.poll_events(events);
            }
        }

        fn device(&self) -> Option<$crate::runtime::devices::ActiveDevice> {
            self.$parts
                .iter()
                .find_map(|part| part.runner.separator.device())
        }
    };
}
pub(crate) use combined_separator_methods;

/// The rate every separator of a combination (a route, an ensemble) runs at (`infos`: theirs,
/// in order); an error naming two that differ, or for a combination without separators. Not
/// realtime-safe: allocates the message.
pub fn shared_rate<'a>(
    mut infos: impl Iterator<Item = &'a SeparatorInfo> + Clone,
) -> Result<u32, String> {
    let Some(first) = infos.clone().next() else {
        return Err("a combination needs at least one separator".into());
    };
    let rate = first.sample_rate_hz();
    match infos.find(|info| info.sample_rate_hz() != rate) {
        Some(other) => Err(format!(
            "{} runs at {} Hz and {} at {rate} Hz: combined separators must share a rate",
            other.name(),
            other.sample_rate_hz(),
            first.name()
        )),
        None => Ok(rate),
    }
}

/// A hop's result for a combination called `name`: its separators' first error, if any, as its
/// own. Realtime-safe but for the error's message.
pub(crate) fn combined_result(
    name: &str,
    first_error: Option<SeparatorError>,
) -> Result<(), SeparatorError> {
    match first_error {
        None => Ok(()),
        Some(error) => Err(SeparatorError {
            separator: name.to_owned(),
            reason: error.to_string(),
        }),
    }
}

/// The facts of a combination of separators (`infos`: theirs, all at one rate, which it runs
/// at): its hop, the least common multiple of theirs, and [`with_combined_facts`]'s.
/// `latency_frames`, `name` and the delivered stems are the caller's. Errors name the
/// separators that do not fit. Not realtime-safe: allocates.
pub(crate) fn combined_info<'a>(
    name: String,
    infos: impl Iterator<Item = &'a SeparatorInfo> + Clone,
    latency_frames: usize,
    delivered: impl IntoIterator<Item = Stem>,
) -> Result<SeparatorInfo, String> {
    let infos = || infos.clone();
    let sample_rate_hz = shared_rate(infos())?;
    let mut hop_frames = 1usize;
    for info in infos() {
        let hop = info.hop_frames().max(1);
        hop_frames = hop_frames / gcd(hop_frames, hop) * hop;
        if hop_frames > MAX_HOP_FRAMES {
            return Err(format!(
                "the separators' hops ({}) have no common multiple up to {MAX_HOP_FRAMES} frames",
                infos()
                    .map(|i| i.hop_frames().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    Ok(with_combined_facts(
        SeparatorInfo::new(name, sample_rate_hz, hop_frames, latency_frames),
        infos(),
    )
    .with_delivered_stems(delivered))
}

/// The facts of a whole-file combination of separators (`infos`: theirs, all at one rate, which
/// it runs at), which has no hop or latency of its own: as [`combined_info`]'s otherwise. Not
/// realtime-safe: allocates.
pub(crate) fn combined_file_info<'a>(
    name: String,
    infos: impl Iterator<Item = &'a SeparatorInfo> + Clone,
    delivered: impl IntoIterator<Item = Stem>,
) -> Result<SeparatorInfo, String> {
    let sample_rate_hz = shared_rate(infos.clone())?;
    Ok(file_info_at(sample_rate_hz, name, infos, delivered))
}

/// [`combined_file_info`] at `sample_rate_hz`, whatever rates its separators run at (each
/// resamples to its own). Not realtime-safe: allocates.
pub(crate) fn file_info_at<'a>(
    sample_rate_hz: u32,
    name: String,
    infos: impl Iterator<Item = &'a SeparatorInfo> + Clone,
    delivered: impl IntoIterator<Item = Stem>,
) -> SeparatorInfo {
    with_combined_facts(SeparatorInfo::new(name, sample_rate_hz, 1, 0), infos)
        .with_delivered_stems(delivered)
}

/// `info` with the facts its separators (`infos`) give a combination: margins and predicted
/// real-time factors summed (they run one after the other), the costliest compute factor,
/// float16 when one is.
fn with_combined_facts<'a>(
    info: SeparatorInfo,
    infos: impl Iterator<Item = &'a SeparatorInfo> + Clone,
) -> SeparatorInfo {
    info.with_scheduling_margin_frames(
        infos
            .clone()
            .map(SeparatorInfo::scheduling_margin_frames)
            .sum(),
    )
    .with_predicted_real_time_factor(
        infos
            .clone()
            .filter_map(SeparatorInfo::predicted_real_time_factor)
            .reduce(|a, b| a + b),
    )
    // The costliest separator dominates (the built-in costs little).
    .with_compute_factor(
        infos
            .clone()
            .map(SeparatorInfo::compute_factor)
            .fold(1.0, f64::max),
    )
    .with_float16(infos.clone().any(SeparatorInfo::is_float16))
}
