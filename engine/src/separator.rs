//! The interface every separator implements, and the choice of separator.

use crate::stem::NUM_SEPARATED_STEMS;

/// Audio for several channels, stored channel after channel (planar) in one allocation.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanarBlock {
    num_channels: usize,
    num_frames: usize,
    samples: Vec<f32>,
}

impl PlanarBlock {
    /// A silent block. Not realtime-safe: allocates.
    pub fn new(num_channels: usize, num_frames: usize) -> Self {
        Self {
            num_channels,
            num_frames,
            samples: vec![0.0; num_channels * num_frames],
        }
    }

    /// Number of channels.
    pub fn num_channels(&self) -> usize {
        self.num_channels
    }

    /// Number of frames per channel.
    pub fn num_frames(&self) -> usize {
        self.num_frames
    }

    /// One channel's samples. Realtime-safe.
    pub fn channel(&self, channel: usize) -> &[f32] {
        &self.samples[channel * self.num_frames..(channel + 1) * self.num_frames]
    }

    /// One channel's samples, mutable. Realtime-safe.
    pub fn channel_mut(&mut self, channel: usize) -> &mut [f32] {
        &mut self.samples[channel * self.num_frames..(channel + 1) * self.num_frames]
    }

    /// Sets every sample to zero. Realtime-safe.
    pub fn clear(&mut self) {
        self.samples.fill(0.0);
    }
}

/// Channel index of `stem`'s `channel` (0 = left, 1 = right) in a separator's output block.
#[inline]
pub const fn stem_channel(stem_index: usize, channel: usize) -> usize {
    stem_index * 2 + channel
}

/// A source separator that works on fixed hops of stereo audio at its own sample rate.
///
/// The contract, which the pipeline relies on for exact latency and block-size independence:
/// - every call to [`Separator::process_hop`] consumes exactly [`Separator::hop_frames`] frames and
///   produces exactly as many frames of each separated stem;
/// - output frame `j` of the separator's output stream holds the stems of input frame
///   `j − latency_frames()` (frames before the start are silence);
/// - the output depends only on the input samples, never on timing, so it is deterministic.
pub trait Separator: Send {
    /// A short human-readable name ("Built-in (DSP)").
    fn name(&self) -> &str;

    /// The sample rate the separator works at.
    fn sample_rate_hz(&self) -> u32;

    /// Frames consumed and produced per [`Separator::process_hop`] call.
    fn hop_frames(&self) -> usize;

    /// Algorithmic delay (look-ahead) in frames at the separator's rate.
    fn latency_frames(&self) -> usize;

    /// Extra output buffering, in frames at the separator's rate, that real-time playback needs
    /// beyond the pipeline's own quantization: for neural models, the time one chunk's inference
    /// may take. Deterministic, so the reported latency is too.
    fn scheduling_margin_frames(&self) -> usize {
        0
    }

    /// Whether the separator delivers guitar and piano (six-stem models). Those that do not
    /// must leave the guitar and piano channels silent; the pipeline then skips them.
    fn has_extra_stems(&self) -> bool {
        false
    }

    /// Forgets all history, as if newly created. Must not allocate.
    fn reset(&mut self);

    /// Separates one hop. `input` holds 2 channels (left, right) of `hop_frames()` frames;
    /// `stems` holds `2 × NUM_SEPARATED_STEMS` channels laid out by [`stem_channel`] for vocals,
    /// drums and bass. The residual `Other` stem is computed by the pipeline.
    fn process_hop(&mut self, input: &PlanarBlock, stems: &mut PlanarBlock);

    /// For separators that run a model on a device: what a new session must be built from. The
    /// worker builds it on a helper thread while this separator keeps running.
    fn session_source(&self) -> Option<crate::onnx::SessionSource> {
        None
    }

    /// Swaps in a session built from [`Separator::session_source`], between hops.
    fn install_session(&mut self, _session: crate::runtime::session::AcquiredSession) {}

    /// The device running the model right now, `None` for DSP separators.
    fn active_device(&self) -> Option<crate::onnx::ActiveDevice> {
        None
    }
}

/// Which separator a stream runs. Saved in the plugin state.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SeparatorChoice {
    /// The embedded DSP separator, no model file needed.
    #[default]
    Builtin,
    /// An ONNX model file.
    Model(std::path::PathBuf),
}

impl SeparatorChoice {
    /// Stable id used in saved state and on the command line: `builtin` or `file:<path>`.
    pub fn id(&self) -> String {
        match self {
            SeparatorChoice::Builtin => "builtin".into(),
            SeparatorChoice::Model(path) => format!("file:{}", path.display()),
        }
    }

    /// Parses an id (see [`SeparatorChoice::id`]); a bare path ending in `.onnx` is a model.
    pub fn from_id(id: &str) -> Option<Self> {
        match id {
            "builtin" => Some(SeparatorChoice::Builtin),
            _ => id
                .strip_prefix("file:")
                .or_else(|| id.ends_with(".onnx").then_some(id))
                .filter(|p| !p.is_empty())
                .map(|p| SeparatorChoice::Model(p.into())),
        }
    }

    /// Builds the separator on the chosen device (models only). A model that cannot be loaded is
    /// an error that says why. Not realtime-safe: allocates, may load a model.
    pub fn build(
        &self,
        device: crate::runtime::devices::DeviceChoice,
    ) -> Result<Box<dyn Separator>, String> {
        match self {
            SeparatorChoice::Builtin => Ok(Box::new(crate::builtin::BuiltinSeparator::new())),
            SeparatorChoice::Model(path) => Ok(Box::new(crate::families::ModelSeparator::load(
                path, device,
            )?)),
        }
    }
}

/// Number of channels in a separator's output block.
pub const SEPARATED_CHANNELS: usize = NUM_SEPARATED_STEMS * 2;

/// A separator that puts its whole input on the Vocals stem after a fixed delay. It exists to
/// test the streaming machinery: with it, every stem's timing can be checked exactly.
pub struct PassthroughSeparator {
    sample_rate_hz: u32,
    hop_frames: usize,
    latency_frames: usize,
    /// Delay line per channel, `latency_frames + hop_frames` long, oldest first.
    delay: [Vec<f32>; 2],
}

impl PassthroughSeparator {
    /// Creates the separator. Not realtime-safe: allocates.
    pub fn new(sample_rate_hz: u32, hop_frames: usize, latency_frames: usize) -> Self {
        let len = latency_frames + hop_frames;
        Self {
            sample_rate_hz,
            hop_frames,
            latency_frames,
            delay: [vec![0.0; len], vec![0.0; len]],
        }
    }
}

impl Separator for PassthroughSeparator {
    fn name(&self) -> &str {
        "Passthrough (test)"
    }

    fn sample_rate_hz(&self) -> u32 {
        self.sample_rate_hz
    }

    fn hop_frames(&self) -> usize {
        self.hop_frames
    }

    fn latency_frames(&self) -> usize {
        self.latency_frames
    }

    fn reset(&mut self) {
        for channel in &mut self.delay {
            channel.fill(0.0);
        }
    }

    fn process_hop(&mut self, input: &PlanarBlock, stems: &mut PlanarBlock) {
        stems.clear();
        for channel in 0..2 {
            let delay = &mut self.delay[channel];
            delay[self.latency_frames..].copy_from_slice(input.channel(channel));
            stems
                .channel_mut(stem_channel(0, channel))
                .copy_from_slice(&delay[..self.hop_frames]);
            delay.copy_within(self.hop_frames.., 0);
        }
    }
}
