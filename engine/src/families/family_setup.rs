//! [`FamilySetup`]: what a family's parameters make of a graph, whichever kind of graph it is.
//! A CPU graph's [`ModelDescription`] and a waveform graph's [`WaveformFamily`] are both made
//! from it.

use std::sync::Arc;

use super::description::{FamilyPipeline, GraphIo, ModelDescription, ModelFamily};
use super::overlap_add::ChunkLayout;
use super::stem_sources::StemSource;
use super::waveform_family::WaveformFamily;
use crate::stem::NUM_SEPARATED_STEMS;

/// A family's pipeline parameters `P` checked against a graph, with the stems, chunking and
/// rate they give.
pub(super) struct FamilySetup<P> {
    pub family: ModelFamily,
    pub params: P,
    /// The model's own stem names, in output order.
    pub stems: Vec<String>,
    pub stem_sources: [StemSource; NUM_SEPARATED_STEMS],
    pub layout: ChunkLayout,
    pub sample_rate_hz: u32,
    /// Where the parameters came from.
    pub source: String,
}

impl<P> FamilySetup<P> {
    /// What a waveform graph of this setup is: its chunks overlap-added with `windows`, and
    /// `reference(params)` the whole-file reference it shares (`None` for HTDemucs, whose
    /// waveform graphs chunk whole files as `apply_model`).
    pub fn waveform_with(
        self,
        windows: fn(usize) -> (Vec<f64>, Vec<f64>),
        reference: impl FnOnce(P) -> Option<Arc<dyn FamilyPipeline>>,
    ) -> WaveformFamily {
        WaveformFamily {
            family: self.family,
            stems: self.stems,
            stem_sources: self.stem_sources,
            layout: self.layout,
            windows,
            sample_rate_hz: self.sample_rate_hz,
            params_source: self.source,
            reference: reference(self.params),
        }
    }
}

impl<P: FamilyPipeline + 'static> FamilySetup<P> {
    /// The description of a (float32) graph with inputs and outputs `io`, run by this setup's
    /// pipeline.
    pub fn describe(self, io: GraphIo) -> ModelDescription {
        ModelDescription {
            family: self.family,
            pipeline: Arc::new(self.params),
            stems: self.stems,
            stem_sources: self.stem_sources,
            layout: self.layout,
            sample_rate_hz: self.sample_rate_hz,
            io,
            params_source: self.source,
            is_float16: false,
        }
    }

    /// What a waveform graph of this setup is: its chunks overlap-added with `windows`, and
    /// this setup's pipeline as its reference.
    pub fn waveform(self, windows: fn(usize) -> (Vec<f64>, Vec<f64>)) -> WaveformFamily {
        self.waveform_with(windows, |params| Some(Arc::new(params)))
    }
}
