//! [`SeparatorInfo`]: what a separator is, fixed when it is built — its name, rate, hop,
//! latency, the stems it delivers and, for a neural model, what its model costs.

use crate::stem::{Stem, NUM_SEPARATED_STEMS};

/// The facts about a separator that are fixed when it is built (see
/// [`crate::separator::Separator::info`]). What changes while it runs (its device, its model
/// runs) the separator reports itself.
///
/// [`SeparatorInfo::new`] gives a DSP separator's; the `with_*` setters add what a neural model
/// or a route has on top.
#[derive(Debug, Clone, PartialEq)]
pub struct SeparatorInfo {
    name: String,
    sample_rate_hz: u32,
    hop_frames: usize,
    latency_frames: usize,
    scheduling_margin_frames: usize,
    /// Which separated stems ([`Stem::index`] < [`NUM_SEPARATED_STEMS`]) it delivers.
    delivers: [bool; NUM_SEPARATED_STEMS],
    model_sha256: Option<String>,
    compute_factor: f64,
    predicted_real_time_factor: Option<f64>,
    is_float16: bool,
}

impl SeparatorInfo {
    /// A DSP separator's facts: `name`, the `sample_rate_hz` it works at, the `hop_frames` of
    /// each [`crate::separator::Separator::process_hop`] call and its `latency_frames`; no
    /// scheduling margin, vocals, drums and bass delivered, no model. Not realtime-safe:
    /// allocates the name.
    pub fn new(
        name: impl Into<String>,
        sample_rate_hz: u32,
        hop_frames: usize,
        latency_frames: usize,
    ) -> Self {
        Self {
            name: name.into(),
            sample_rate_hz,
            hop_frames,
            latency_frames,
            scheduling_margin_frames: 0,
            delivers: std::array::from_fn(|index| !Stem::ALL[index].is_extra()),
            model_sha256: None,
            compute_factor: 1.0,
            predicted_real_time_factor: None,
            is_float16: false,
        }
    }

    /// These facts under another name. Not realtime-safe: allocates.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// These facts with a scheduling margin of `frames` (see
    /// [`SeparatorInfo::scheduling_margin_frames`]).
    pub fn with_scheduling_margin_frames(mut self, frames: usize) -> Self {
        self.scheduling_margin_frames = frames;
        self
    }

    /// These facts delivering exactly `stems` (and `Other`, which is always there).
    pub fn with_delivered_stems(mut self, stems: impl IntoIterator<Item = Stem>) -> Self {
        self.delivers = [false; NUM_SEPARATED_STEMS];
        for stem in stems {
            if stem != Stem::Other {
                self.delivers[stem.index()] = true;
            }
        }
        self
    }

    /// These facts for a neural separator running the model file(s) of SHA-256 `sha256`.
    pub fn with_model_sha256(mut self, sha256: String) -> Self {
        self.model_sha256 = Some(sha256);
        self
    }

    /// These facts with a compute factor of `factor` (see [`SeparatorInfo::compute_factor`]).
    pub fn with_compute_factor(mut self, factor: f64) -> Self {
        self.compute_factor = factor;
        self
    }

    /// These facts with `factor` as the predicted real-time factor (see
    /// [`SeparatorInfo::predicted_real_time_factor`]).
    pub fn with_predicted_real_time_factor(mut self, factor: Option<f64>) -> Self {
        self.predicted_real_time_factor = factor;
        self
    }

    /// These facts for a model that computes in float16 when `is_float16`.
    pub fn with_float16(mut self, is_float16: bool) -> Self {
        self.is_float16 = is_float16;
        self
    }

    /// A short human-readable name ("Built-in (DSP)", a model's file name). Realtime-safe.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The sample rate the separator works at. Realtime-safe.
    pub fn sample_rate_hz(&self) -> u32 {
        self.sample_rate_hz
    }

    /// Frames consumed and produced per [`crate::separator::Separator::process_hop`] call.
    /// Realtime-safe.
    pub fn hop_frames(&self) -> usize {
        self.hop_frames
    }

    /// Algorithmic delay (look-ahead) in frames at the separator's rate. Realtime-safe.
    pub fn latency_frames(&self) -> usize {
        self.latency_frames
    }

    /// Extra output buffering, in frames at the separator's rate, that real-time playback needs
    /// beyond the pipeline's own quantization: for neural models, the time one chunk's inference
    /// may take; 0 for DSP separators. Deterministic, so the reported latency is too.
    /// Realtime-safe.
    pub fn scheduling_margin_frames(&self) -> usize {
        self.scheduling_margin_frames
    }

    /// Whether the separator delivers guitar and piano (six-stem models). Those that do not
    /// must leave the guitar and piano channels silent; the pipeline then skips them.
    /// Realtime-safe.
    pub fn has_extra_stems(&self) -> bool {
        Stem::EXTRA.iter().any(|&stem| self.delivers_stem(stem))
    }

    /// Whether the separator delivers `stem`; one it does not deliver stays silent (a
    /// two-stem model's drums and bass). `Other`, the residual, is always there. A DSP
    /// separator delivers vocals, drums and bass. Realtime-safe.
    pub fn delivers_stem(&self, stem: Stem) -> bool {
        stem == Stem::Other || self.delivers[stem.index()]
    }

    /// SHA-256 of the model file(s) a neural separator runs, for saved state and caches;
    /// `None` for DSP separators and routes. Realtime-safe.
    pub fn model_sha256(&self) -> Option<&str> {
        self.model_sha256.as_deref()
    }

    /// How many times the work of its reference pipeline a neural separator does for its
    /// look-ahead ([`crate::look_ahead::LookAhead`]): 1 at `Full` and for DSP separators.
    /// Realtime-safe.
    pub fn compute_factor(&self) -> f64 {
        self.compute_factor
    }

    /// For a shortened look-ahead: the real-time factor the device will need (model time per
    /// second of audio), measured by timing model runs on the device the separator was built
    /// on, so a setting too heavy for the device can be flagged before anything plays. `None`
    /// at `Full` and for DSP separators. Realtime-safe.
    pub fn predicted_real_time_factor(&self) -> Option<f64> {
        self.predicted_real_time_factor
    }

    /// Whether a neural separator's model computes in float16 (made for GPUs: on the CPU it
    /// runs slower than its float32 original, which the user should hear about). Every device
    /// runs the same model file, so this holds after a device switch. Realtime-safe.
    pub fn is_float16(&self) -> bool {
        self.is_float16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dsp_separator_delivers_the_three_stems_and_other() {
        let info = SeparatorInfo::new("dsp", 44_100, 256, 0);
        let delivered: Vec<Stem> = Stem::ALL
            .into_iter()
            .filter(|&stem| info.delivers_stem(stem))
            .collect();
        assert_eq!(delivered, Stem::FOUR.to_vec());
        assert!(!info.has_extra_stems());
        let six = info.with_delivered_stems(Stem::ALL);
        assert!(six.has_extra_stems());
        assert!(Stem::ALL.into_iter().all(|stem| six.delivers_stem(stem)));
        let vocals = six.with_delivered_stems([Stem::Vocals, Stem::Piano]);
        assert!(vocals.has_extra_stems());
        assert!(!vocals.delivers_stem(Stem::Drums));
        assert!(vocals.delivers_stem(Stem::Other));
    }
}
