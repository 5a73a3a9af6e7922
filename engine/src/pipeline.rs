//! The deterministic chunked pipeline the worker runs: host rate → separator rate → stems →
//! host rate. `Other`, the exact residual of the separated stems, is not computed here: the
//! audio side subtracts the stems from its own copy of the input, delayed by the latency (see
//! [`crate::stream`]), so the ring between them carries only separated stems.
//!
//! Every stage works on fixed-size chunks, so the output depends only on the input samples and
//! never on how they were split into host blocks: this is what makes offline renders
//! bit-identical for any block size.

use std::mem::MaybeUninit;

use rubato::{FftFixedInOut, Resampler};

use crate::dsp::{exponent_carry, flush_subnormal, gcd, has_non_finite, is_any_non_finite};
use crate::error::EngineError;
use crate::planar::PlanarBlock;
use crate::separator::{stem_channel, Separator, SeparatorError, SEPARATED_CHANNELS};
use crate::stem::Stem;
use crate::stem_sink::{StemFrameLayout, StemSink};

/// The separator and the resamplers around it. Lives on the worker thread.
pub struct StemPipeline {
    separator: Box<dyn Separator>,
    /// Host frames consumed per [`StemPipeline::process_chunk`] call.
    input_chunk_frames: usize,
    /// The chunk of host input [`StemPipeline::chunk_input_mut`] hands out when resampling
    /// (empty at equal rates, where the chunk is `hop_input`).
    host_chunk: [Vec<f32>; 2],
    /// Host → separator rate, `None` when the rates match.
    to_separator: Option<Resampling>,
    /// Separator → host rate for the separated stems, `None` when the rates match.
    from_separator: Option<Resampling>,
    /// Input at the separator rate waiting for a full hop (resampling only: at equal rates a
    /// chunk is a hop).
    separator_input: [Vec<f32>; 2],
    /// Separated stems at the separator rate waiting to be resampled back (resampling only).
    separator_output: Vec<Vec<f32>>,
    hop_input: PlanarBlock,
    hop_output: PlanarBlock,
    /// What the output frames carry: the separator's stems.
    layout: StemFrameLayout,
    /// Frames at the separator rate inserted after the separator so that the total delay is a
    /// whole number of host samples.
    padding_frames: usize,
    delay_samples: usize,
    quantization_samples: usize,
    /// Scratch for resampled host-rate stems (empty when the rates match).
    host_stems: Vec<Vec<f32>>,
}

/// A fixed-ratio resampler with its output buffer.
struct Resampling {
    resampler: FftFixedInOut<f32>,
    output: Vec<Vec<f32>>,
    /// Channels worth resampling: a separator without guitar and piano leaves theirs silent,
    /// and their output stays silent without the work.
    active_channels: Vec<bool>,
}

impl Resampling {
    fn new(
        from_hz: u32,
        to_hz: u32,
        chunk_frames: usize,
        num_channels: usize,
    ) -> Result<Self, EngineError> {
        let resampler =
            FftFixedInOut::new(from_hz as usize, to_hz as usize, chunk_frames, num_channels)
                .map_err(|e| EngineError::Resampler(e.to_string()))?;
        let output = vec![vec![0.0; resampler.output_frames_max()]; num_channels];
        Ok(Self {
            resampler,
            output,
            active_channels: vec![true; num_channels],
        })
    }
}

impl StemPipeline {
    /// Builds the pipeline for a host sample rate. Not realtime-safe: allocates.
    pub fn new(separator: Box<dyn Separator>, host_rate_hz: u32) -> Result<Self, EngineError> {
        let info = separator.info();
        let separator_rate_hz = info.sample_rate_hz();
        let hop_frames = info.hop_frames();
        let separator_latency = info.latency_frames();
        let has_extra_stems = info.has_extra_stems();
        let margin_frames = info.scheduling_margin_frames();

        let (input_chunk_frames, separator_chunk_frames, padding_frames) = if separator_rate_hz
            == host_rate_hz
        {
            (hop_frames, hop_frames, 0)
        } else {
            // Chunks are whole multiples of the rates' reduced ratio so that the resamplers'
            // chunk sizes are exact; an even multiple keeps their delays whole.
            let g = gcd(host_rate_hz as usize, separator_rate_hz as usize);
            let host_unit = host_rate_hz as usize / g;
            let separator_unit = separator_rate_hz as usize / g;
            let units = ((hop_frames as f64 / separator_unit as f64).round() as usize).max(1);
            let units = units.div_ceil(2) * 2;
            // Pad so the separator's latency is a whole number of host samples.
            let padding = (separator_unit - separator_latency % separator_unit) % separator_unit;
            (host_unit * units, separator_unit * units, padding)
        };

        let (to_separator, from_separator) = if separator_rate_hz == host_rate_hz {
            (None, None)
        } else {
            let to = Resampling::new(host_rate_hz, separator_rate_hz, input_chunk_frames, 2)?;
            let mut from = Resampling::new(
                separator_rate_hz,
                host_rate_hz,
                separator_chunk_frames,
                SEPARATED_CHANNELS,
            )?;
            if !has_extra_stems {
                for stem in Stem::EXTRA {
                    for channel in 0..2 {
                        from.active_channels[stem_channel(stem.index(), channel)] = false;
                    }
                }
            }
            debug_assert_eq!(to.resampler.output_frames_max(), separator_chunk_frames);
            debug_assert_eq!(from.resampler.output_frames_max(), input_chunk_frames);
            (Some(to), Some(from))
        };

        let ratio = host_rate_hz as f64 / separator_rate_hz as f64;
        // Time for the separator's own work (a neural chunk's inference), in host samples.
        let margin_samples = (margin_frames as f64 * ratio).ceil() as usize;
        let (delay_samples, quantization_samples) = if to_separator.is_some() {
            // Each FFT resampler delays by half its chunk: together one host chunk.
            let separator_delay =
                ((separator_latency + padding_frames) as f64 * ratio).round() as usize;
            let quantization = 2 * input_chunk_frames + (hop_frames as f64 * ratio).ceil() as usize;
            (
                input_chunk_frames + separator_delay,
                quantization + margin_samples,
            )
        } else {
            (separator_latency, hop_frames + margin_samples)
        };

        let is_resampling = to_separator.is_some();
        let layout = StemFrameLayout::for_separator(has_extra_stems);
        let mut pipeline = Self {
            separator,
            input_chunk_frames,
            host_chunk: std::array::from_fn(|_| {
                vec![0.0; if is_resampling { input_chunk_frames } else { 0 }]
            }),
            to_separator,
            from_separator,
            separator_input: std::array::from_fn(|_| {
                Vec::with_capacity(if is_resampling {
                    separator_chunk_frames + hop_frames
                } else {
                    0
                })
            }),
            // Up to a resampler chunk and a hop, and the padding.
            separator_output: (0..SEPARATED_CHANNELS)
                .map(|_| {
                    Vec::with_capacity(if is_resampling {
                        2 * (separator_chunk_frames + hop_frames) + padding_frames
                    } else {
                        0
                    })
                })
                .collect(),
            hop_input: PlanarBlock::new(2, hop_frames),
            hop_output: PlanarBlock::new(SEPARATED_CHANNELS, hop_frames),
            layout,
            padding_frames,
            delay_samples,
            quantization_samples,
            host_stems: (0..SEPARATED_CHANNELS)
                .map(|_| Vec::with_capacity(if is_resampling { input_chunk_frames } else { 0 }))
                .collect(),
        };
        pipeline.reset();
        Ok(pipeline)
    }

    /// Host frames consumed per [`StemPipeline::process_chunk`] call.
    pub fn input_chunk_frames(&self) -> usize {
        self.input_chunk_frames
    }

    /// What each output frame carries.
    pub fn frame_layout(&self) -> StemFrameLayout {
        self.layout
    }

    /// The pipeline's delay in host samples: output frame `t` holds the stems of input frame
    /// `t − delay_samples()`.
    pub fn delay_samples(&self) -> usize {
        self.delay_samples
    }

    /// How far, in host samples, the chunked stages may hold output back: an output frame is
    /// produced at the latest once the input has reached `frame + quantization_samples()`.
    pub fn quantization_samples(&self) -> usize {
        self.quantization_samples
    }

    /// An upper bound of the frames one [`StemPipeline::process_chunk`] call produces.
    pub fn max_output_frames_per_chunk(&self) -> usize {
        match &self.to_separator {
            None => self.input_chunk_frames,
            Some(to) => {
                let separator_chunk = to.resampler.output_frames_max();
                let hop = self.hop_input.num_frames();
                let max_chunks_out =
                    (separator_chunk + hop + self.padding_frames).div_ceil(separator_chunk) + 1;
                max_chunks_out * self.input_chunk_frames
            }
        }
    }

    /// The separator's display name.
    pub fn separator_name(&self) -> &str {
        self.separator.info().name()
    }

    /// The separator.
    pub fn separator(&self) -> &dyn Separator {
        self.separator.as_ref()
    }

    /// The separator, mutable (for requests between chunks).
    pub fn separator_mut(&mut self) -> &mut dyn Separator {
        self.separator.as_mut()
    }

    /// Gives the separator back (to reuse it in another pipeline).
    pub fn into_separator(self) -> Box<dyn Separator> {
        self.separator
    }

    /// Clears all history, as if newly built. Does not allocate.
    pub fn reset(&mut self) {
        self.separator.reset();
        if let Some(to) = &mut self.to_separator {
            to.resampler.reset();
        }
        if let Some(from) = &mut self.from_separator {
            from.resampler.reset();
        }
        for channel in &mut self.separator_input {
            channel.clear();
        }
        for channel in &mut self.separator_output {
            channel.clear();
            channel.resize(self.padding_frames, 0.0);
        }
    }

    /// Where the next chunk of sanitized host input is gathered, left and right,
    /// [`StemPipeline::input_chunk_frames`] frames each, for [`StemPipeline::process_chunk`]. At
    /// equal rates this is the separator's own hop input, so the chunk is not copied again.
    /// What is written stays until it is overwritten (a reset does not clear it).
    pub fn chunk_input_mut(&mut self) -> [&mut [f32]; 2] {
        if self.to_separator.is_none() {
            self.hop_input.stereo_mut()
        } else {
            let [left, right] = &mut self.host_chunk;
            [left, right]
        }
    }

    /// Separates the chunk gathered in [`StemPipeline::chunk_input_mut`] and writes the
    /// finished stem frames ([`StemPipeline::frame_layout`]: the separated stems in
    /// [`crate::Stem::ALL`] order, left then right) to `output`, which has room for
    /// [`StemPipeline::max_output_frames_per_chunk`].
    ///
    /// The output is complete either way. An error reports the first hop the separator could not
    /// separate (an error of its own, or NaN/Inf in its stems): that hop's separated stems are
    /// silenced, so its residual `Other` is the whole input there.
    pub fn process_chunk(&mut self, output: &mut StemSink<'_>) -> Result<(), SeparatorError> {
        let mut first_error = None;
        let Some(to) = &mut self.to_separator else {
            // Equal rates: the chunk is one hop, gathered in place, and its stems go out as
            // they are, checked for NaN/Inf as they are written (one pass over them, not two).
            let mut result = self.run_separator();
            let stems = std::array::from_fn(|channel| self.hop_output.channel(channel));
            if !emit(&stems, self.layout, output) {
                result = Err(self.non_finite_error());
                self.hop_output.clear();
            }
            return result;
        };
        // Lengths match the resampler's fixed chunk, so this cannot fail.
        let [left, right] = &self.host_chunk;
        let _ = to
            .resampler
            .process_into_buffer(&[left, right], &mut to.output, None);
        for (fifo, resampled) in self.separator_input.iter_mut().zip(&to.output) {
            fifo.extend_from_slice(resampled);
        }

        let hop = self.hop_input.num_frames();
        while self.separator_input[0].len() >= hop {
            for (channel, fifo) in self.separator_input.iter_mut().enumerate() {
                self.hop_input
                    .channel_mut(channel)
                    .copy_from_slice(&fifo[..hop]);
                fifo.drain(..hop);
            }
            if let Err(error) = self.separate_hop() {
                first_error.get_or_insert(error);
            }
            for (channel, fifo) in self.separator_output.iter_mut().enumerate() {
                fifo.extend_from_slice(self.hop_output.channel(channel));
            }
        }

        if let Some(from) = &mut self.from_separator {
            let chunk = from.resampler.input_frames_next();
            while self.separator_output[0].len() >= chunk {
                let inputs: [&[f32]; SEPARATED_CHANNELS] =
                    std::array::from_fn(|channel| &self.separator_output[channel][..chunk]);
                let _ = from.resampler.process_into_buffer(
                    &inputs,
                    &mut from.output,
                    Some(&from.active_channels),
                );
                for fifo in &mut self.separator_output {
                    fifo.drain(..chunk);
                }
                for (host, resampled) in self.host_stems.iter_mut().zip(&from.output) {
                    host.clear();
                    host.extend_from_slice(resampled);
                }
                let stems = std::array::from_fn(|channel| self.host_stems[channel].as_slice());
                if !emit(&stems, self.layout, output) {
                    // (Resampled finite stems overflowing: silenced all the same.)
                    first_error.get_or_insert_with(|| SeparatorError {
                        separator: self.separator.info().name().to_owned(),
                        reason: "its resampled output held NaN or infinite samples".into(),
                    });
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Separates `hop_input` into `hop_output`. A hop the separator could not separate (an
    /// error, or NaN/Inf in its stems) is silenced and reported.
    fn separate_hop(&mut self) -> Result<(), SeparatorError> {
        let mut result = self.run_separator();
        // A misbehaving separator never gets NaN into the stems, nor passes silently. (The
        // channels the layout leaves out are not used.)
        let mut channels = (0..self.layout.frame_samples()).map(|c| self.hop_output.channel(c));
        if result.is_ok() && channels.any(has_non_finite) {
            result = Err(self.non_finite_error());
            self.hop_output.clear();
        }
        result
    }

    /// Has the separator separate `hop_input` into `hop_output`; silences the hop if it fails.
    fn run_separator(&mut self) -> Result<(), SeparatorError> {
        let result = self
            .separator
            .process_hop(&self.hop_input, &mut self.hop_output);
        if result.is_err() {
            self.hop_output.clear();
        }
        result
    }

    /// The error for a hop whose stems (the channels the layout carries) hold NaN or ±Inf.
    fn non_finite_error(&self) -> SeparatorError {
        let num_non_finite: usize = (0..self.layout.frame_samples())
            .map(|c| {
                let channel = self.hop_output.channel(c);
                channel.iter().filter(|x| !x.is_finite()).count()
            })
            .sum();
        SeparatorError {
            separator: self.separator.info().name().to_owned(),
            reason: format!("its output held {num_non_finite} NaN or infinite samples"),
        }
    }
}

/// Interleaves the separated stems the layout carries into `output`'s next frames, flushing
/// subnormals. Returns whether every sample was finite: if one was NaN or ±Inf, the frames are
/// written silent instead (a misbehaving separator never gets NaN into the stems).
fn emit(
    stems: &[&[f32]; SEPARATED_CHANNELS],
    layout: StemFrameLayout,
    output: &mut StemSink<'_>,
) -> bool {
    let mut start = 0;
    let mut carries = 0;
    let mut runs = output.next_runs(stems[0].len());
    for run in &mut runs {
        let (frames, run_carries) = match layout {
            StemFrameLayout::ThreeStems => {
                emit_run::<{ StemFrameLayout::ThreeStems.frame_samples() }>(stems, start, run)
            }
            StemFrameLayout::FiveStems => {
                emit_run::<{ StemFrameLayout::FiveStems.frame_samples() }>(stems, start, run)
            }
        };
        start += frames;
        carries |= run_carries;
    }
    let is_finite = !is_any_non_finite(carries);
    if !is_finite {
        for run in runs {
            run.fill(MaybeUninit::new(0.0));
        }
    }
    is_finite
}

/// Interleaves frames `start..` of the first `WIDTH` separated channels into `output`, frame by
/// frame (each frame's samples are written together): every slot of `output` is written.
/// Returns the frames written and the samples' [`exponent_carry`]s, OR-ed together (the
/// [`has_non_finite`] check, in the same pass).
#[inline]
fn emit_run<const WIDTH: usize>(
    stems: &[&[f32]; SEPARATED_CHANNELS],
    start: usize,
    output: &mut [MaybeUninit<f32>],
) -> (usize, u32) {
    let (frames, rest) = output.as_chunks_mut::<WIDTH>();
    debug_assert!(rest.is_empty());
    let channels: [&[f32]; WIDTH] =
        std::array::from_fn(|sample| &stems[sample][start..start + frames.len()]);
    let mut carries = 0u32;
    for (i, frame) in frames.iter_mut().enumerate() {
        for (out, channel) in frame.iter_mut().zip(channels) {
            let sample = channel[i];
            carries |= exponent_carry(sample);
            *out = MaybeUninit::new(flush_subnormal(sample));
        }
    }
    (frames.len(), carries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interleave::{initialised_room, room_values};
    use crate::passthrough::{PassthroughSeparator, WeightedSixStems};
    use crate::testing::Scripted;

    /// One chunk through the pipeline, its frames appended to `out` (a sink holds no more than
    /// `max_output_frames_per_chunk`, so a chunk that made more would panic).
    fn process_chunk(
        pipeline: &mut StemPipeline,
        left: &[f32],
        right: &[f32],
        out: &mut Vec<f32>,
    ) -> Result<(), SeparatorError> {
        let layout = pipeline.frame_layout();
        let [chunk_left, chunk_right] = pipeline.chunk_input_mut();
        chunk_left.copy_from_slice(left);
        chunk_right.copy_from_slice(right);
        let mut room = initialised_room(
            pipeline.max_output_frames_per_chunk() * layout.frame_samples(),
            0.0,
        );
        let mut sink = StemSink::new(&mut room, &mut [], layout);
        let result = pipeline.process_chunk(&mut sink);
        let num_frames = sink.written_frames();
        out.extend_from_slice(&room_values(&room[..num_frames * layout.frame_samples()]));
        result
    }

    fn run_pipeline(pipeline: &mut StemPipeline, left: &[f32], right: &[f32]) -> Vec<f32> {
        let chunk = pipeline.input_chunk_frames();
        let mut out = Vec::new();
        for (l, r) in left.chunks_exact(chunk).zip(right.chunks_exact(chunk)) {
            process_chunk(pipeline, l, r, &mut out).unwrap();
        }
        out
    }

    #[test]
    fn emit_interleaves_the_layouts_stems_across_every_wrap_of_the_ring() {
        let num_frames = 7;
        let stems: Vec<Vec<f32>> = (0..SEPARATED_CHANNELS)
            .map(|c| {
                (0..num_frames)
                    .map(|i| (c * 10 + i) as f32 * 0.01)
                    .collect()
            })
            .collect();
        let stem_slices: [&[f32]; SEPARATED_CHANNELS] = std::array::from_fn(|c| &stems[c][..]);
        for layout in [StemFrameLayout::ThreeStems, StemFrameLayout::FiveStems] {
            let width = layout.frame_samples();
            // Every split of the ring's room, one frame more than is written.
            for room_split in 0..=num_frames + 1 {
                let mut first = initialised_room(room_split * width, f32::NAN);
                let mut second = initialised_room((num_frames + 1 - room_split) * width, f32::NAN);
                let mut sink = StemSink::new(&mut first, &mut second, layout);
                emit(&stem_slices, layout, &mut sink);
                assert_eq!(sink.written_frames(), num_frames);
                let mut ring = room_values(&first);
                ring.extend(room_values(&second));
                for (i, frame) in ring.chunks_exact(width).enumerate() {
                    for (sample, &value) in frame.iter().enumerate() {
                        if i < num_frames {
                            assert_eq!(value, stems[sample][i], "{layout:?} split {room_split}");
                        } else {
                            assert!(value.is_nan(), "{layout:?}: wrote past the frames");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_separator_without_guitar_and_piano_sends_three_stems_a_frame() {
        let three =
            StemPipeline::new(Box::new(PassthroughSeparator::new(44_100, 256, 0)), 44_100).unwrap();
        assert_eq!(three.frame_layout(), StemFrameLayout::ThreeStems);
        assert_eq!(three.frame_layout().frame_samples(), 6);
        let five = StemPipeline::new(Box::new(WeightedSixStems::new()), 44_100).unwrap();
        assert_eq!(five.frame_layout(), StemFrameLayout::FiveStems);
        assert_eq!(five.frame_layout().frame_samples(), SEPARATED_CHANNELS);
    }

    #[test]
    fn six_stem_frames_carry_guitar_and_piano() {
        let mut pipeline = StemPipeline::new(Box::new(WeightedSixStems::new()), 44_100).unwrap();
        let hop = pipeline.input_chunk_frames();
        let input = vec![0.25; hop];
        let mut out = Vec::new();
        process_chunk(&mut pipeline, &input, &input, &mut out).unwrap();
        let mut hop_input = PlanarBlock::new(2, hop);
        hop_input.channel_mut(0).fill(0.25);
        hop_input.channel_mut(1).fill(0.25);
        let mut stems = PlanarBlock::new(SEPARATED_CHANNELS, hop);
        WeightedSixStems::new()
            .process_hop(&hop_input, &mut stems)
            .unwrap();
        assert_eq!(out.len(), hop * SEPARATED_CHANNELS);
        for (i, frame) in out.chunks_exact(SEPARATED_CHANNELS).enumerate() {
            for (channel, &sample) in frame.iter().enumerate() {
                assert_eq!(sample, stems.channel(channel)[i]);
                assert_ne!(sample, 0.0, "channel {channel}");
            }
        }
    }

    fn argmax_abs(values: impl Iterator<Item = f32>) -> usize {
        values
            .enumerate()
            .fold((0, 0.0f32), |best, (i, v)| {
                if v.abs() > best.1 {
                    (i, v.abs())
                } else {
                    best
                }
            })
            .0
    }

    #[test]
    fn impulse_lands_exactly_at_the_pipeline_delay_at_any_rate() {
        for host_rate_hz in [22_050, 32_000, 44_100, 48_000, 88_200, 96_000, 192_000] {
            let separator = Box::new(PassthroughSeparator::new(44_100, 1024, 300));
            let mut pipeline = StemPipeline::new(separator, host_rate_hz).unwrap();
            let len = pipeline.input_chunk_frames() * 40;
            let impulse_at = 3_000;
            let mut left = vec![0.0; len];
            left[impulse_at] = 1.0;
            let right = left.clone();
            let out = run_pipeline(&mut pipeline, &left, &right);
            let vocals_left = out
                .chunks_exact(pipeline.frame_layout().frame_samples())
                .map(|f| f[stem_channel(Stem::Vocals.index(), 0)]);
            let peak = argmax_abs(vocals_left);
            assert_eq!(
                peak,
                impulse_at + pipeline.delay_samples(),
                "host {host_rate_hz} Hz, delay {}",
                pipeline.delay_samples()
            );
        }
    }

    #[test]
    fn non_finite_separator_output_is_silenced_and_reported() {
        // Every stem channel NaN.
        let nan_separator = || {
            Scripted::around(PassthroughSeparator::new(44_100, 256, 0))
                .named("nan")
                .after_hop(|stems| {
                    for c in 0..stems.num_channels() {
                        stems.channel_mut(c).fill(f32::NAN);
                    }
                })
        };
        let mut pipeline = StemPipeline::new(Box::new(nan_separator()), 44_100).unwrap();
        let input = vec![0.25; 256];
        let mut out = Vec::new();
        let error = process_chunk(&mut pipeline, &input, &input, &mut out).unwrap_err();
        assert_eq!(error.separator, "nan");
        // Only the channels the frames carry count: 3 stems × 2 channels × 256 frames.
        assert!(error.reason.contains("1536 NaN"), "{error}");
        // The hop is silenced: its residual, computed by the audio side, is the whole input.
        assert_eq!(out.len(), 256 * 6);
        assert!(out.iter().all(|&x| x == 0.0));

        // Through the resamplers (where the stems are checked before they are resampled).
        let mut pipeline = StemPipeline::new(Box::new(nan_separator()), 48_000).unwrap();
        let input = vec![0.25; pipeline.input_chunk_frames()];
        let mut out = Vec::new();
        let errors: Vec<SeparatorError> = (0..4)
            .filter_map(|_| process_chunk(&mut pipeline, &input, &input, &mut out).err())
            .collect();
        assert!(
            !errors.is_empty(),
            "a NaN hop through the resamplers passed"
        );
        assert!(
            errors.iter().all(|e| e.reason.contains("NaN")),
            "{errors:?}"
        );
        assert!(!out.is_empty());
        assert!(out.iter().all(|&x| x == 0.0));
    }

    #[test]
    fn emit_writes_a_frame_with_a_non_finite_sample_silent() {
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let mut stems = vec![vec![0.5f32; 5]; SEPARATED_CHANNELS];
            stems[5][3] = bad;
            let slices: [&[f32]; SEPARATED_CHANNELS] = std::array::from_fn(|c| &stems[c][..]);
            let layout = StemFrameLayout::ThreeStems;
            let mut room = initialised_room(5 * layout.frame_samples(), 9.0);
            let mut sink = StemSink::new(&mut room, &mut [], layout);
            assert!(!emit(&slices, layout, &mut sink), "{bad} passed");
            assert_eq!(sink.written_frames(), 5);
            assert!(room_values(&room).iter().all(|&x| x == 0.0), "{bad}");
            // The largest finite value and subnormals are finite.
            stems[5][3] = f32::MAX;
            stems[0][0] = f32::MIN_POSITIVE / 2.0;
            let slices: [&[f32]; SEPARATED_CHANNELS] = std::array::from_fn(|c| &stems[c][..]);
            let mut sink = StemSink::new(&mut room, &mut [], layout);
            assert!(emit(&slices, layout, &mut sink));
            let values = room_values(&room);
            assert_eq!((values[0], values[3 * 6 + 5]), (0.0, f32::MAX));
        }
    }
}
