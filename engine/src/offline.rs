//! Whole-file separation through the same streaming path the plugin's offline render uses.
//!
//! [`OfflineStream`] is the streaming form: push decoded input in blocks of any size, receive
//! the stems of the same frames, aligned with the input (the stream's latency is trimmed at the
//! start and flushed at the end). Memory stays O(block), whatever the file's length.
//! [`separate`] is the whole-buffer form built on it.

use crate::error::EngineError;
use crate::separator::Separator;
use crate::stem::{Stem, NUM_STEMS};
use crate::stereo_input::StereoInput;
use crate::stream::{
    spawn_stream, ProcessingMode, StemStreamController, StemStreamHandle, StreamConfig,
    OFFLINE_WAIT_TIMEOUT,
};

/// Block size used to feed the stream. Any size gives the same result; this one is fast (each
/// block is one hand-off to the worker and back, and its buffers still stay in cache).
pub const OFFLINE_BLOCK_FRAMES: usize = 16_384;
/// How long whole-file separation waits for one model run under way: without limit (unlike a
/// host's bounce, nobody's session hangs on it, and the user can stop it).
pub const WHOLE_FILE_RUN_LIMIT: std::time::Duration = std::time::Duration::MAX;

/// Separated stems, aligned with the input (no latency offset), same length and rate.
pub struct SeparatedStems {
    /// The sample rate of input and stems.
    pub sample_rate_hz: u32,
    /// `[stem][channel][frame]` in [`Stem::ALL`] order.
    pub stems: [[Vec<f32>; 2]; NUM_STEMS],
    /// The latency the stream had (and that was removed).
    pub latency_samples: usize,
}

impl SeparatedStems {
    /// The stems of a whole input of `num_frames` frames at `sample_rate_hz`: `run` hands its
    /// sink every run of stem frames of a stream whose latency (removed) was `latency_samples`,
    /// in order from the first frame, and they are collected; `progress` gets the fraction
    /// collected (0..=1) after each run. An error of `run` is returned. Not realtime-safe:
    /// allocates the whole result.
    pub(crate) fn collect(
        num_frames: usize,
        sample_rate_hz: u32,
        latency_samples: usize,
        mut progress: impl FnMut(f32),
        run: impl FnOnce(&mut StemSink<'_>) -> Result<(), EngineError>,
    ) -> Result<Self, EngineError> {
        let mut stems: [[Vec<f32>; 2]; NUM_STEMS] =
            std::array::from_fn(|_| std::array::from_fn(|_| Vec::with_capacity(num_frames)));
        run(&mut |frames: StemFrames<'_>| {
            frames.append_to(&mut stems);
            progress(stems[0][0].len() as f32 / num_frames.max(1) as f32);
            Ok(())
        })?;
        Ok(SeparatedStems {
            sample_rate_hz,
            stems,
            latency_samples,
        })
    }

    /// One stem's channels.
    pub fn stem(&self, stem: Stem) -> &[Vec<f32>; 2] {
        &self.stems[stem.index()]
    }
}

/// What [`SeparatedStems::collect`] hands its `run`: a sink for a stream's stem frames.
pub(crate) type StemSink<'s> = dyn FnMut(StemFrames<'_>) -> Result<(), EngineError> + 's;

/// Where [`StemFrames`] are.
enum FramesSource<'a> {
    /// The stream handle's last block.
    Handle(&'a StemStreamHandle),
    /// Stems of their own, `[stem][channel][frame]`.
    Stems(&'a [[Vec<f32>; 2]; NUM_STEMS]),
}

/// The stems of a run of consecutive input frames, handed out by
/// [`crate::whole_file::WholeFileStream`] (and the [`OfflineStream`] it may run). Borrows the
/// stream's block buffers: copy or write them out before the next call.
pub struct StemFrames<'a> {
    source: FramesSource<'a>,
    /// First frame of the handle's last block that belongs to the output (the rest of the
    /// block's beginning is latency).
    skip_frames: usize,
    /// End of the output frames within the handle's last block.
    end_frames: usize,
    /// Index of the first frame in the whole output (= input) timeline.
    first_frame: u64,
}

impl<'a> StemFrames<'a> {
    /// The frames `range` of `stems` (`[stem][channel][frame]` in [`Stem::ALL`] order), the
    /// first of them frame `first_frame` of the input. Realtime-safe.
    pub fn from_stems(
        stems: &'a [[Vec<f32>; 2]; NUM_STEMS],
        range: std::ops::Range<usize>,
        first_frame: u64,
    ) -> Self {
        Self {
            source: FramesSource::Stems(stems),
            skip_frames: range.start,
            end_frames: range.end,
            first_frame,
        }
    }

    /// Number of frames. Realtime-safe.
    pub fn num_frames(&self) -> usize {
        self.end_frames - self.skip_frames
    }

    /// Position of the first frame in the input's timeline. Realtime-safe.
    pub fn first_frame(&self) -> u64 {
        self.first_frame
    }

    /// Appends these frames of every stem to `stems` (`[stem][channel][frame]`, [`Stem::ALL`]
    /// order). Not realtime-safe: grows the vectors.
    pub fn append_to(&self, stems: &mut [[Vec<f32>; 2]; NUM_STEMS]) {
        for stem in Stem::ALL {
            for (channel, samples) in stems[stem.index()].iter_mut().enumerate() {
                samples.extend_from_slice(self.channel(stem, channel));
            }
        }
    }

    /// One channel (0: left, 1: right) of one stem. Realtime-safe.
    pub fn channel(&self, stem: Stem, channel: usize) -> &'a [f32] {
        let samples = match self.source {
            FramesSource::Handle(handle) => handle.stem_output(stem, channel),
            FramesSource::Stems(stems) => &stems[stem.index()][channel],
        };
        &samples[self.skip_frames..self.end_frames]
    }
}

/// Separates a stereo stream of any length block by block, in offline mode, so the stems are
/// exactly what the plugin renders offline (shifted back by its latency), whatever the block
/// sizes. Memory use does not grow with the length of the input.
///
/// ```
/// use stemflow_engine::{BuiltinSeparator, OfflineStream, Stem, StereoInput};
///
/// let mut stream = OfflineStream::new(Box::new(BuiltinSeparator::new()), 44_100).unwrap();
/// let mut vocals = Vec::new();
/// let block = vec![0.1f32; 10_000];
/// stream
///     .push(StereoInput::new(&block, &block).unwrap(), |frames| {
///         vocals.extend_from_slice(frames.channel(Stem::Vocals, 0));
///         Ok::<(), stemflow_engine::EngineError>(())
///     })
///     .unwrap();
/// stream
///     .finish(|frames| {
///         vocals.extend_from_slice(frames.channel(Stem::Vocals, 0));
///         Ok::<(), stemflow_engine::EngineError>(())
///     })
///     .unwrap();
/// assert_eq!(vocals.len(), 10_000);
/// ```
pub struct OfflineStream {
    handle: StemStreamHandle,
    controller: StemStreamController,
    sample_rate_hz: u32,
    latency_samples: usize,
    /// Input frames pushed so far (excluding the flush at the end).
    input_frames: u64,
    /// Frames of the stream's output seen so far, latency included.
    stream_output_frames: u64,
    silence: Vec<f32>,
}

impl OfflineStream {
    /// Starts the stream and its worker thread for input at `sample_rate_hz`. Not realtime-safe:
    /// allocates and spawns a thread.
    pub fn new(separator: Box<dyn Separator>, sample_rate_hz: u32) -> Result<Self, EngineError> {
        let config = StreamConfig {
            host_sample_rate_hz: sample_rate_hz as f32,
            max_block_frames: OFFLINE_BLOCK_FRAMES,
            mode: ProcessingMode::Offline,
            is_offline_only: true,
        };
        let (mut handle, controller) = spawn_stream(separator, &config)?;
        // A whole file waits for every model run however long it takes (a RoFormer on two
        // cores: minutes per chunk, more on a loaded machine); only a worker that makes no
        // progress outside a model run for this long is taken for stuck.
        handle.set_offline_wait(OFFLINE_WAIT_TIMEOUT, WHOLE_FILE_RUN_LIMIT);
        let latency_samples = handle.latency_samples();
        Ok(Self {
            handle,
            controller,
            sample_rate_hz,
            latency_samples,
            input_frames: 0,
            stream_output_frames: 0,
            silence: vec![0.0; OFFLINE_BLOCK_FRAMES],
        })
    }

    /// The stream's latency in samples, which this type removes. Realtime-safe.
    pub fn latency_samples(&self) -> usize {
        self.latency_samples
    }

    /// The sample rate of input and stems. Realtime-safe.
    pub fn sample_rate_hz(&self) -> u32 {
        self.sample_rate_hz
    }

    /// Where a six-stem model's guitar and piano go (default: into `Other`), as the plugin's
    /// "Guitar & Piano" setting does. Realtime-safe.
    pub fn set_extra_stems(&mut self, extra_stems: crate::stem::ExtraStems) {
        self.handle.set_extra_stems(extra_stems);
    }

    /// The stream's statistics (non-finite input samples, the worker's time). Realtime-safe.
    pub fn stats(&self) -> &std::sync::Arc<crate::stream::StreamStats> {
        self.controller.stats()
    }

    /// Input frames pushed so far. Realtime-safe.
    pub fn input_frames(&self) -> u64 {
        self.input_frames
    }

    /// Separates all of `input` (at `sample_rate_hz`) with `separator` in one stream: the input,
    /// then `latency` frames of silence, the output kept from frame `latency` on, so the stems
    /// are exactly what the plugin renders offline, aligned with the input. Not realtime-safe:
    /// allocates the whole result and waits for the worker.
    pub fn separate_all(
        separator: Box<dyn Separator>,
        input: StereoInput<'_>,
        sample_rate_hz: u32,
    ) -> Result<SeparatedStems, EngineError> {
        let mut stream = OfflineStream::new(separator, sample_rate_hz)?;
        let latency_samples = stream.latency_samples();
        SeparatedStems::collect(
            input.num_frames(),
            sample_rate_hz,
            latency_samples,
            |_| {},
            |sink| {
                stream.push(input, &mut *sink)?;
                stream.finish(sink)
            },
        )
    }

    /// Separates the next frames of `input` and calls `sink` with every run of stem frames that
    /// became ready: the stems of earlier input, since the output trails the input by the
    /// latency until [`OfflineStream::finish`]. Errors from `sink` stop the call and are
    /// returned. Not realtime-safe: waits for the worker.
    pub fn push<E: From<EngineError>>(
        &mut self,
        input: StereoInput<'_>,
        mut sink: impl FnMut(StemFrames<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        for block in input.chunks(OFFLINE_BLOCK_FRAMES) {
            self.process_block(block.left(), block.right(), &mut sink)?;
            self.input_frames += block.num_frames() as u64;
        }
        Ok(())
    }

    /// Flushes the stream after the last input: feeds `latency` frames of silence and hands the
    /// remaining stems to `sink`, so that exactly as many stem frames came out as input frames
    /// went in. Not realtime-safe: waits for the worker.
    pub fn finish<E: From<EngineError>>(
        &mut self,
        mut sink: impl FnMut(StemFrames<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let total_frames = self.input_frames + self.latency_samples as u64;
        self.handle.end_input();
        while self.stream_output_frames < total_frames {
            let block = (total_frames - self.stream_output_frames).min(OFFLINE_BLOCK_FRAMES as u64)
                as usize;
            let silence = std::mem::take(&mut self.silence);
            let result = self.process_block(&silence[..block], &silence[..block], &mut sink);
            self.silence = silence;
            result?;
        }
        Ok(())
    }

    /// Stops the worker and hands the separator back, reset, so the next input reuses the loaded
    /// model. `None` when the worker died. Not realtime-safe: joins the worker.
    pub fn into_separator(self) -> Option<Box<dyn Separator>> {
        let Self {
            handle, controller, ..
        } = self;
        drop(handle);
        controller.into_separator()
    }

    /// Runs one block of at most [`OFFLINE_BLOCK_FRAMES`] through the handle and hands the
    /// frames past the latency to `sink`.
    fn process_block<E: From<EngineError>>(
        &mut self,
        left: &[f32],
        right: &[f32],
        sink: &mut impl FnMut(StemFrames<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let block = self.handle.process(left, right);
        self.check_worker().map_err(E::from)?;
        let position = self.stream_output_frames;
        self.stream_output_frames += block as u64;
        let latency = self.latency_samples as u64;
        let skip_frames = latency.saturating_sub(position).min(block as u64) as usize;
        if skip_frames == block {
            return Ok(());
        }
        sink(StemFrames {
            source: FramesSource::Handle(&self.handle),
            skip_frames,
            end_frames: block,
            first_frame: position + skip_frames as u64 - latency,
        })
    }

    /// Turns a dead worker, a failed separator or a frame the worker did not deliver into an
    /// error: an offline result is complete and exact, or it is not a result.
    fn check_worker(&self) -> Result<(), EngineError> {
        let stats = self.controller.stats();
        if stats.separator_failures() > 0 {
            if let Some(error) = stats.separator_error() {
                return Err(EngineError::Separator(error));
            }
        }
        if let Some(error) = stats.worker_error() {
            return Err(EngineError::Worker(error));
        }
        if !self.controller.is_alive() {
            return Err(EngineError::Worker("the worker thread stopped".into()));
        }
        if stats.underrun_frames() > 0 {
            return Err(EngineError::Worker(format!(
                "the worker stopped delivering stems (no progress for {} s outside a model run)",
                OFFLINE_WAIT_TIMEOUT.as_secs()
            )));
        }
        Ok(())
    }
}

/// [`OfflineStream::separate_all`] of a planar stereo signal, for the tests that compare other
/// ways of separating with it.
#[cfg(test)]
pub(crate) fn separate(
    separator: Box<dyn Separator>,
    input: &[Vec<f32>; 2],
    sample_rate_hz: u32,
) -> Result<SeparatedStems, EngineError> {
    OfflineStream::separate_all(separator, StereoInput::planar(input)?, sample_rate_hz)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::BuiltinSeparator;
    use crate::passthrough::PassthroughSeparator;
    use crate::separator::SeparatorInfo;
    use crate::testing::Scripted;
    use stemflow_kit::demo_song::DemoSong;

    #[test]
    fn offline_stems_sum_to_the_input() {
        let song = DemoSong::generate(44_100, 3.0);
        let mix = song.mix();
        let result = separate(Box::new(BuiltinSeparator::new()), &mix, 44_100).unwrap();
        for channel in 0..2 {
            assert_eq!(result.stems[0][channel].len(), mix[channel].len());
            for (t, &x) in mix[channel].iter().enumerate() {
                let sum: f32 = (0..NUM_STEMS).map(|s| result.stems[s][channel][t]).sum();
                assert!((sum - x).abs() <= 1e-5, "t={t}: {sum} vs {x}");
            }
        }
    }

    #[test]
    fn offline_result_is_identical_across_rates_calls() {
        let song = DemoSong::generate(48_000, 1.5);
        let mix = song.mix();
        let a = separate(Box::new(BuiltinSeparator::new()), &mix, 48_000).unwrap();
        let b = separate(Box::new(BuiltinSeparator::new()), &mix, 48_000).unwrap();
        assert_eq!(a.stems, b.stems);
    }

    /// Pushes `input` through an [`OfflineStream`] in blocks of `block_frames` and collects the
    /// stems, checking that frames arrive in order.
    fn stream_in_blocks(
        input: &[Vec<f32>; 2],
        rate_hz: u32,
        block_frames: usize,
    ) -> [[Vec<f32>; 2]; NUM_STEMS] {
        let mut stream = OfflineStream::new(Box::new(BuiltinSeparator::new()), rate_hz).unwrap();
        let mut stems: [[Vec<f32>; 2]; NUM_STEMS] = Default::default();
        let mut collect = |frames: StemFrames<'_>| -> Result<(), EngineError> {
            assert_eq!(frames.first_frame(), stems[0][0].len() as u64);
            frames.append_to(&mut stems);
            Ok(())
        };
        for block in StereoInput::planar(input).unwrap().chunks(block_frames) {
            stream.push(block, &mut collect).unwrap();
        }
        stream.finish(&mut collect).unwrap();
        stems
    }

    #[test]
    fn streaming_in_any_blocks_equals_the_whole_buffer() {
        let song = DemoSong::generate(48_000, 1.2);
        let mix = song.mix();
        let whole = separate(Box::new(BuiltinSeparator::new()), &mix, 48_000).unwrap();
        for block_frames in [1_000, 4_096, 10_007] {
            let streamed = stream_in_blocks(&mix, 48_000, block_frames);
            assert_eq!(streamed, whole.stems, "block size {block_frames}");
        }
    }

    #[test]
    fn input_shorter_than_the_latency_comes_out_complete() {
        for num_frames in [0, 1, 10, 5_000] {
            let input = [vec![0.25f32; num_frames], vec![-0.25f32; num_frames]];
            let stems = stream_in_blocks(&input, 44_100, 333);
            for channel in 0..2 {
                assert_eq!(stems[0][channel].len(), num_frames);
                for t in 0..num_frames {
                    let sum: f32 = (0..NUM_STEMS).map(|s| stems[s][channel][t]).sum();
                    assert!(
                        (sum - input[channel][t]).abs() <= 1e-5,
                        "{num_frames} frames, t={t}"
                    );
                }
            }
        }
    }

    #[test]
    fn sink_errors_stop_the_stream() {
        let mut stream = OfflineStream::new(Box::new(BuiltinSeparator::new()), 44_100).unwrap();
        let block = vec![0.0f32; 20_000];
        let result = stream.push(StereoInput::new(&block, &block).unwrap(), |_| {
            Err(EngineError::Io("disk full".into()))
        });
        assert!(matches!(result, Err(EngineError::Io(message)) if message == "disk full"));
    }

    #[test]
    fn a_failing_separator_fails_the_render_and_names_the_model() {
        let mut stream = OfflineStream::new(
            // A model that fails on every hop.
            Box::new(
                Scripted::around(PassthroughSeparator::new(44_100, 512, 0))
                    .named("broken.onnx")
                    .before_hop(|_| {
                        Err(crate::separator::SeparatorError {
                            separator: "broken.onnx".into(),
                            reason: "the model returned 3 values where its signature declares 4"
                                .into(),
                        })
                    }),
            ),
            44_100,
        )
        .unwrap();
        let block = vec![0.1f32; 20_000];
        let result = stream
            .push(StereoInput::new(&block, &block).unwrap(), |_| {
                Ok::<(), EngineError>(())
            })
            .and_then(|()| stream.finish(|_| Ok::<(), EngineError>(())));
        match result {
            Err(EngineError::Separator(error)) => {
                assert_eq!(error.separator, "broken.onnx");
                assert!(error
                    .to_string()
                    .contains("broken.onnx failed: the model returned 3 values"));
            }
            other => panic!("expected a separator error, got {other:?}"),
        }
    }

    #[test]
    fn the_separator_comes_back_reset_for_the_next_input() {
        let song = DemoSong::generate(44_100, 1.5);
        let mix = song.mix();
        let fresh = separate(Box::new(BuiltinSeparator::new()), &mix, 44_100).unwrap();
        let mut stream = OfflineStream::new(Box::new(BuiltinSeparator::new()), 44_100).unwrap();
        let other = [vec![0.3f32; 30_000], vec![-0.2f32; 30_000]];
        stream
            .push(StereoInput::planar(&other).unwrap(), |_| {
                Ok::<(), EngineError>(())
            })
            .unwrap();
        stream.finish(|_| Ok::<(), EngineError>(())).unwrap();
        let separator = stream.into_separator().expect("the worker is alive");
        let reused = separate(separator, &mix, 44_100).unwrap();
        assert!(
            reused.stems == fresh.stems,
            "a reused separator must forget the last input"
        );
    }

    /// Counts its hops and the frames each started at; its stems are silent.
    struct CountingSeparator {
        info: SeparatorInfo,
        hop_starts: std::sync::Arc<std::sync::Mutex<Vec<usize>>>,
        next_start: usize,
    }

    impl Separator for CountingSeparator {
        fn info(&self) -> &SeparatorInfo {
            &self.info
        }
        fn reset(&mut self) {
            self.next_start = 0;
        }
        fn process_hop(
            &mut self,
            _input: &crate::planar::PlanarBlock,
            stems: &mut crate::planar::PlanarBlock,
        ) -> Result<(), crate::separator::SeparatorError> {
            // Slow enough that an eager worker reaches the flush's last chunk before the stream
            // stops.
            std::thread::sleep(std::time::Duration::from_millis(2));
            self.hop_starts.lock().unwrap().push(self.next_start);
            self.next_start += self.info.hop_frames();
            stems.clear();
            Ok(())
        }
    }

    #[test]
    fn no_hop_runs_wholly_in_the_silence_after_the_last_frame_needed() {
        // 5 500 frames with a 2 500-frame separator delay: the stems of frame 5 499 come out of
        // the hop of input frames 7 000..8 000 (the separator's output trails its input), so 8
        // hops are needed; the latency's flush feeds more silence than that, and a hop wholly in
        // it would be a model run nobody reads.
        for _ in 0..5 {
            let hop_starts = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let separator = CountingSeparator {
                info: SeparatorInfo::new("counting", 44_100, 1_000, 2_500),
                hop_starts: hop_starts.clone(),
                next_start: 0,
            };
            let mut stream = OfflineStream::new(Box::new(separator), 44_100).unwrap();
            let input = vec![0.25f32; 5_500];
            let mut num_frames = 0;
            let mut count = |frames: StemFrames<'_>| -> Result<(), EngineError> {
                num_frames += frames.num_frames();
                Ok(())
            };
            stream
                .push(StereoInput::new(&input, &input).unwrap(), &mut count)
                .unwrap();
            stream.finish(&mut count).unwrap();
            assert_eq!(num_frames, 5_500);
            assert!(stream.into_separator().is_some());
            let hop_starts = hop_starts.lock().unwrap().clone();
            assert_eq!(hop_starts, (0..8).map(|i| i * 1_000).collect::<Vec<_>>());
        }
    }
}
