//! [`WaveformFamily`]: what a family says about a waveform graph (a graph Stemflow made for
//! GPUs), apart from the waveform codec so that the families it asks do not import it back.

use std::sync::Arc;

use super::description::{FamilyPipeline, ModelFamily};
use super::overlap_add::ChunkLayout;
use super::stem_sources::StemSource;
use crate::stem::NUM_SEPARATED_STEMS;

/// What a family says about a waveform graph of `T`-frame chunks and `S` stems.
pub(super) struct WaveformFamily {
    pub family: ModelFamily,
    pub stems: Vec<String>,
    pub stem_sources: [StemSource; NUM_SEPARATED_STEMS],
    pub layout: ChunkLayout,
    pub windows: fn(usize) -> (Vec<f64>, Vec<f64>),
    pub sample_rate_hz: u32,
    pub params_source: String,
    /// The family's own pipeline (its CPU graph's), whose reference chunking of a whole file
    /// and reference stems the waveform graph shares; `None`: HTDemucs, whose waveform graphs
    /// chunk whole files as `apply_model`.
    pub reference: Option<Arc<dyn FamilyPipeline>>,
}
