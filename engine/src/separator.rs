//! The interface every separator implements: fixed hops of stereo audio in, stems out, one
//! description of what it is ([`SeparatorInfo`]), plus one generic control hook through which
//! the worker forwards requests (such as a device change) and collects what changed, between
//! hops.

use crate::planar::PlanarBlock;
use crate::runtime::devices::{ActiveDevice, DeviceChoice, DeviceEvent};
pub use crate::separator_info::SeparatorInfo;
use crate::stem::NUM_SEPARATED_STEMS;

/// Number of channels in a separator's output block.
pub const SEPARATED_CHANNELS: usize = NUM_SEPARATED_STEMS * 2;

/// Channel index of `stem`'s `channel` (0 = left, 1 = right) in a separator's output block.
#[inline]
pub const fn stem_channel(stem_index: usize, channel: usize) -> usize {
    stem_index * 2 + channel
}

/// Why a hop could not be separated: the model and the reason, ready to show a user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeparatorError {
    /// The separator's name (a model's file name).
    pub separator: String,
    /// What went wrong.
    pub reason: String,
}

impl std::fmt::Display for SeparatorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} failed: {}", self.separator, self.reason)
    }
}

impl std::error::Error for SeparatorError {}

/// A request from the plugin, the editor or the CLI to a running separator, delivered by the
/// worker between hops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeparatorRequest {
    /// Run the model on another device: the separator prepares it beside the running one and
    /// swaps at a hop boundary, without a gap.
    SetDevice(DeviceChoice),
}

/// A source separator that works on fixed hops of stereo audio at its own sample rate.
///
/// The contract, which the pipeline relies on for exact latency and block-size independence:
/// - every call to [`Separator::process_hop`] consumes exactly [`SeparatorInfo::hop_frames`]
///   frames and produces exactly as many frames of each separated stem;
/// - output frame `j` of the separator's output stream holds the stems of input frame
///   `j − latency_frames()` (frames before the start are silence);
/// - the output depends only on the input samples, never on timing, so it is deterministic;
/// - its [`Separator::info`] does not change once it is built.
pub trait Separator: Send {
    /// What the separator is: name, rate, hop, latency, the stems it delivers, what its model
    /// costs. Fixed once built. Realtime-safe.
    fn info(&self) -> &SeparatorInfo;

    /// Forgets all history, as if newly created. Must not allocate.
    fn reset(&mut self);

    /// Separates one hop. `input` holds 2 channels (left, right) of `hop_frames()` frames;
    /// `stems` holds `2 × NUM_SEPARATED_STEMS` channels laid out by [`stem_channel`] for the
    /// separated stems. The residual `Other` stem is computed by the stream.
    ///
    /// An error means this hop's stems are unusable (a model failed or produced NaN): the
    /// pipeline silences them, so `Other` carries the whole input, and the worker reports it.
    fn process_hop(
        &mut self,
        input: &PlanarBlock,
        stems: &mut PlanarBlock,
    ) -> Result<(), SeparatorError>;

    /// Handles a request (called by the worker between hops). Separators without a device
    /// ignore it.
    fn request(&mut self, _request: SeparatorRequest) {}

    /// Finishes work prepared in the background (e.g. installs a session built for another
    /// device) and reports what changed. Called by the worker between hops.
    fn poll_events(&mut self, _events: &mut dyn FnMut(DeviceEvent)) {}

    /// The device running the model right now (it changes on a switch or a fallback); `None`
    /// for DSP separators, which run on the CPU of the thread that calls them.
    fn device(&self) -> Option<ActiveDevice> {
        None
    }

    /// How many times a neural separator has run its model since it was built (resets do not
    /// count back), for benchmarks that check no run is wasted; 0 for DSP separators.
    fn model_runs(&self) -> u64 {
        0
    }
}
