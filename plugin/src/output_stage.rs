//! [`OutputStage`]: what `process()` does with each block around the stream — the input copied
//! out of the host's buffer, the stems scaled by their gains, written to their outputs and
//! summed into the mix, the bypass crossfade. Where each stem goes ([`StemRoute`]) is decided
//! once per stem and block, not per sample: the per-sample loop of [`mix_stem`] is compiled for
//! its output alone, so it never branches on the port layout.

use std::ops::Range;

use nice_plug::prelude::{Buffer, Smoother, SmoothingStyle};
use stemflow_engine::stream::StemStreamHandle;
use stemflow_engine::{Stem, NUM_STEMS};

use crate::params::{StemflowParams, SWITCH_SMOOTHING_MS};
use crate::swap::StreamSwapHandle;

/// How the plugin's outputs are laid out, derived from the host's chosen audio layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutputLayout {
    /// Stereo main output plus six stereo aux outputs.
    Stereo,
    /// Mono main output plus six mono aux outputs.
    Mono,
    /// One 10-channel main output: mix, vocals, drums, bass, other (each L/R); guitar and piano
    /// stay in Other.
    TenChannel,
}

/// Where a stem's samples go in the host's buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StemRoute {
    /// Its own stereo aux output (port index).
    AuxStereo(usize),
    /// Its own mono aux output (port index): the mean of left and right.
    AuxMono(usize),
    /// Two channels of the main output, from this one (the 10-channel layout).
    MainPair(usize),
    /// Nowhere of its own (guitar and piano in the 10-channel layout, where Other holds them):
    /// it only counts in the mix.
    MixOnly,
}

impl StemRoute {
    /// Where `stem` goes in `layout`. Realtime-safe.
    pub(crate) fn of(layout: OutputLayout, stem: Stem) -> Self {
        let port = stem.output_index();
        match layout {
            OutputLayout::Stereo => StemRoute::AuxStereo(port),
            OutputLayout::Mono => StemRoute::AuxMono(port),
            // Guitar and piano are folded into Other (silent) here.
            OutputLayout::TenChannel if stem.is_extra() => StemRoute::MixOnly,
            OutputLayout::TenChannel => StemRoute::MainPair(2 + 2 * port),
        }
    }
}

/// The per-sample gains of one block that every stem shares, and the mix being summed.
#[derive(Debug, Default)]
pub(crate) struct BlockMix {
    /// Gain of the separated stems at each frame (the fade of a separator swap, less bypass).
    wet: Vec<f32>,
    /// Gain of the dry input at each frame (bypass, faded with a swap).
    bypass: Vec<f32>,
    /// The stems' sum, left and right.
    mix: [Vec<f32>; 2],
}

impl BlockMix {
    /// Scratch for blocks of up to `max_block_frames`. Not realtime-safe: allocates.
    fn new(max_block_frames: usize) -> Self {
        Self {
            wet: vec![0.0; max_block_frames],
            bypass: vec![0.0; max_block_frames],
            mix: [vec![0.0; max_block_frames], vec![0.0; max_block_frames]],
        }
    }

    /// Starts a block of `frames`: `gains()` gives each frame's `(fade, bypass)` in order, and
    /// the mix is cleared. Realtime-safe.
    fn begin(&mut self, frames: usize, mut gains: impl FnMut() -> (f32, f32)) {
        for (wet, bypass) in self.wet[..frames]
            .iter_mut()
            .zip(&mut self.bypass[..frames])
        {
            let (fade, dry) = gains();
            *bypass = dry * fade;
            *wet = fade - *bypass;
        }
        for channel in &mut self.mix {
            channel[..frames].fill(0.0);
        }
    }
}

/// One stem's gains, ramped per sample.
pub(crate) struct StemGains<'a> {
    /// The stem's Gain parameter, smoothed.
    pub(crate) gain: &'a Smoother<f32>,
    /// Its mute/solo ramp.
    pub(crate) switch: &'a Smoother<f32>,
}

/// Scales `sources` (left, right) of one block by `gains` and the block's wet gain, adds them
/// to the block's mix and hands each frame's `(frame, left, right)` to `write`. Returns the
/// block's peak when `should_meter`, else 0. Realtime-safe: no allocation, and no branch on the
/// output layout inside the loop (`write` is one route's, inlined).
#[inline]
pub(crate) fn mix_stem(
    block: &mut BlockMix,
    gains: StemGains<'_>,
    sources: [&[f32]; 2],
    should_meter: bool,
    mut write: impl FnMut(usize, f32, f32),
) -> f32 {
    let frames = sources[0].len();
    let [mix_left, mix_right] = &mut block.mix;
    let mut peak = 0.0f32;
    for i in 0..frames {
        let gain = gains.gain.next() * gains.switch.next() * block.wet[i];
        let left = sources[0][i] * gain;
        let right = sources[1][i] * gain;
        mix_left[i] += left;
        mix_right[i] += right;
        if should_meter {
            peak = peak.max(left.abs()).max(right.abs());
        }
        write(i, left, right);
    }
    peak
}

/// The host's buffers of one `process()` call.
pub(crate) struct HostBuffers<'a, 'main, 'aux> {
    /// The main input, overwritten with the main output (mix, and the stems in the
    /// 10-channel layout).
    pub(crate) main: &'a mut [&'main mut [f32]],
    /// The stem outputs (none in the 10-channel layout).
    pub(crate) aux_outputs: &'a mut [Buffer<'aux>],
}

/// Everything `process()` keeps between blocks for its outputs: the layout, scratch sized in
/// `activate`, and the mute/solo and bypass ramps.
pub(crate) struct OutputStage {
    /// How the host laid out the outputs.
    pub(crate) layout: OutputLayout,
    /// Input copies for the stream (the host's main buffer is overwritten in place).
    input: [Vec<f32>; 2],
    /// One block's shared gains and its mix.
    block: BlockMix,
    /// Mute/solo gain per stem (0 or 1), ramped.
    pub(crate) switch_gains: [Smoother<f32>; NUM_STEMS],
    /// Bypass crossfade: 0 = processed, 1 = dry.
    pub(crate) bypass_mix: Smoother<f32>,
}

impl Default for OutputStage {
    fn default() -> Self {
        Self {
            layout: OutputLayout::Stereo,
            input: [Vec::new(), Vec::new()],
            block: BlockMix::default(),
            switch_gains: std::array::from_fn(|_| {
                Smoother::new(SmoothingStyle::Linear(SWITCH_SMOOTHING_MS))
            }),
            bypass_mix: Smoother::new(SmoothingStyle::Linear(SWITCH_SMOOTHING_MS)),
        }
    }
}

impl OutputStage {
    /// Sizes the scratch for `layout` and blocks of up to `max_block_frames`. Not
    /// realtime-safe: allocates.
    pub(crate) fn activate(&mut self, layout: OutputLayout, max_block_frames: usize) {
        self.layout = layout;
        self.input = [vec![0.0; max_block_frames], vec![0.0; max_block_frames]];
        self.block = BlockMix::new(max_block_frames);
    }

    /// Runs `frames` of the host's buffers (at most the activated maximum) through `stream`
    /// and writes the mix to the main output and the stems to theirs;
    /// `swap` fades a separator swap in when one is under way. With `meters`, each stem's peak
    /// is raised to this block's. Realtime-safe: the scratch was sized in `activate`, reading
    /// the input first makes any aliasing of the host's buffers harmless.
    pub(crate) fn render_block(
        &mut self,
        params: &StemflowParams,
        stream: &mut StemStreamHandle,
        swap: Option<&mut StreamSwapHandle>,
        buffers: &mut HostBuffers<'_, '_, '_>,
        frames: Range<usize>,
        meters: Option<&mut [f32; NUM_STEMS]>,
    ) {
        let HostBuffers { main, aux_outputs } = buffers;
        let block = frames.len();
        // Copy the input: the main buffer is also the main output.
        let input_channels = if self.layout == OutputLayout::Mono {
            [0, 0]
        } else {
            [0, 1]
        };
        for (scratch, channel) in self.input.iter_mut().zip(input_channels) {
            scratch[..block].copy_from_slice(&main[channel][frames.clone()]);
        }
        stream.process(&self.input[0][..block], &self.input[1][..block]);
        let bypass_mix = &self.bypass_mix;
        match swap {
            Some(swap) => self
                .block
                .begin(block, || (swap.next_gain(), bypass_mix.next())),
            None => self.block.begin(block, || (1.0, bypass_mix.next())),
        }
        let should_meter = meters.is_some();
        let mut peaks = [0.0f32; NUM_STEMS];
        for stem in Stem::ALL {
            let gains = StemGains {
                gain: &params.stem(stem).gain.smoothed,
                switch: &self.switch_gains[stem.index()],
            };
            let sources = [
                &stream.stem_output(stem, 0)[..block],
                &stream.stem_output(stem, 1)[..block],
            ];
            let mix = &mut self.block;
            // Decided here, once per stem and block; each arm's loop is compiled for its route.
            peaks[stem.index()] = match StemRoute::of(self.layout, stem) {
                StemRoute::AuxStereo(port) => match aux_outputs[port].as_slice() {
                    [left, right, ..] => {
                        let (left, right) = (&mut left[frames.clone()], &mut right[frames.clone()]);
                        mix_stem(mix, gains, sources, should_meter, |i, l, r| {
                            left[i] = l;
                            right[i] = r;
                        })
                    }
                    _ => mix_stem(mix, gains, sources, should_meter, |_, _, _| {}),
                },
                StemRoute::AuxMono(port) => {
                    let out = &mut aux_outputs[port].as_slice()[0][frames.clone()];
                    mix_stem(mix, gains, sources, should_meter, |i, l, r| {
                        out[i] = 0.5 * (l + r)
                    })
                }
                StemRoute::MainPair(channel) => match main.get_mut(channel..channel + 2) {
                    Some([left, right]) => {
                        let (left, right) = (&mut left[frames.clone()], &mut right[frames.clone()]);
                        mix_stem(mix, gains, sources, should_meter, |i, l, r| {
                            left[i] = l;
                            right[i] = r;
                        })
                    }
                    _ => mix_stem(mix, gains, sources, should_meter, |_, _, _| {}),
                },
                StemRoute::MixOnly => mix_stem(mix, gains, sources, should_meter, |_, _, _| {}),
            };
        }
        if let Some(meters) = meters {
            for (meter, peak) in meters.iter_mut().zip(peaks) {
                *meter = meter.max(peak);
            }
        }
        self.write_mix(stream, main, frames);
    }

    /// Writes the block's mix plus the dry input at its bypass gain to the main output.
    /// Realtime-safe.
    fn write_mix(&self, stream: &StemStreamHandle, main: &mut [&mut [f32]], frames: Range<usize>) {
        let BlockMix { bypass, mix, .. } = &self.block;
        let dry = [stream.dry_output(0), stream.dry_output(1)];
        let out = |i: usize, channel: usize| mix[channel][i] + bypass[i] * dry[channel][i];
        match self.layout {
            OutputLayout::Mono => {
                for (i, sample) in main[0][frames].iter_mut().enumerate() {
                    *sample = 0.5 * (out(i, 0) + out(i, 1));
                }
            }
            OutputLayout::Stereo | OutputLayout::TenChannel => {
                for channel in 0..2 {
                    for (i, sample) in main[channel][frames.clone()].iter_mut().enumerate() {
                        *sample = out(i, channel);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stem_is_scaled_summed_and_written_frame_by_frame() {
        let mut block = BlockMix::new(4);
        let mut bypass = [0.0, 0.5, 1.0, 0.0].into_iter();
        block.begin(4, || (1.0, bypass.next().unwrap()));
        assert_eq!(block.wet[..4], [1.0, 0.5, 0.0, 1.0]);
        assert_eq!(block.bypass[..4], [0.0, 0.5, 1.0, 0.0]);
        let gain = Smoother::new(SmoothingStyle::None);
        gain.reset(2.0);
        let switch = Smoother::new(SmoothingStyle::None);
        switch.reset(1.0);
        let left = [1.0, 1.0, 1.0, -3.0];
        let right = [0.5, 0.5, 0.5, 0.5];
        let mut written = Vec::new();
        let gains = || StemGains {
            gain: &gain,
            switch: &switch,
        };
        let peak = mix_stem(&mut block, gains(), [&left, &right], true, |i, l, r| {
            written.push((i, l, r))
        });
        assert_eq!(
            written,
            [(0, 2.0, 1.0), (1, 1.0, 0.5), (2, 0.0, 0.0), (3, -6.0, 1.0)]
        );
        assert_eq!(peak, 6.0);
        let peak = mix_stem(&mut block, gains(), [&left, &right], false, |_, _, _| {});
        assert_eq!(peak, 0.0);
        assert_eq!(block.mix[0][..4], [4.0, 2.0, 0.0, -12.0]);
        assert_eq!(block.mix[1][..4], [2.0, 1.0, 0.0, 2.0]);
        block.begin(2, || (1.0, 0.0));
        assert_eq!(block.mix[0][..2], [0.0, 0.0]);
    }

    #[test]
    fn every_stem_has_one_route_per_layout() {
        for stem in Stem::ALL {
            let port = stem.output_index();
            assert_eq!(
                StemRoute::of(OutputLayout::Stereo, stem),
                StemRoute::AuxStereo(port)
            );
            assert_eq!(
                StemRoute::of(OutputLayout::Mono, stem),
                StemRoute::AuxMono(port)
            );
        }
        let ten: Vec<_> = Stem::ALL
            .map(|stem| StemRoute::of(OutputLayout::TenChannel, stem))
            .into();
        assert_eq!(
            ten,
            [
                StemRoute::MainPair(2),
                StemRoute::MainPair(4),
                StemRoute::MainPair(6),
                StemRoute::MixOnly,
                StemRoute::MixOnly,
                StemRoute::MainPair(8),
            ]
        );
    }
}
