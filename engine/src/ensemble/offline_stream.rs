//! [`EnsembleOfflineStream`]: a whole file separated by every member of an ensemble, each
//! through its own [`OfflineStream`] (exactly what `stemflow separate --model MEMBER` writes),
//! and their stems combined at the file's rate as MSST's `ensemble.py` combines the members'
//! files: to the file's last sample, its end padded as librosa pads it. Members run in
//! lockstep, block by block, so memory does not grow with the file.

use std::collections::VecDeque;

use super::channel_combiner::{delay_samples_of, ChannelCombiner};
use super::method::EnsembleMethod;
use crate::dsp::sanitize_sample;
use crate::error::EngineError;
use crate::hybrid::PlanarDelay;
use crate::offline::{OfflineStream, StemFrames, OFFLINE_BLOCK_FRAMES};
use crate::separator::Separator;
use crate::stem::{ExtraStems, Stem, NUM_SEPARATED_STEMS, NUM_STEMS};
use crate::stereo_input::StereoInput;

/// How one separated stem is made from the members' stems.
enum StemPlan {
    /// No member delivers it.
    Silent,
    /// One member delivers it: its stem, delayed as the combined stems are.
    One(usize),
    /// Several do: combined channel by channel.
    Combined(Vec<usize>, Box<[ChannelCombiner; 2]>),
}

/// An ensemble's members streaming a whole file in lockstep, combined.
pub struct EnsembleOfflineStream {
    members: Vec<OfflineStream>,
    method: EnsembleMethod,
    plans: Vec<StemPlan>,
    /// Each member's stems not combined yet, `[member][stem][channel]`.
    pending: Vec<[[VecDeque<f32>; 2]; NUM_STEMS]>,
    /// The input not combined yet (for `Other`, the residual), sanitised as a stream does.
    pending_input: [VecDeque<f32>; 2],
    /// Delays the input and single-member stems by the combination's delay.
    delay: PlanarDelay,
    /// How much of the combination's delay is still to be dropped at the start.
    frames_to_drop: usize,
    /// One block's members' stems and the combined stems.
    scratch: Vec<Vec<f32>>,
    combined: [[Vec<f32>; 2]; NUM_STEMS],
    /// Input frames taken and combined frames handed out so far.
    input_frames: u64,
    output_frames: u64,
}

impl EnsembleOfflineStream {
    /// Starts one stream per member for input at `sample_rate_hz`. Not realtime-safe:
    /// allocates and spawns threads.
    pub fn new(
        members: Vec<Box<dyn Separator>>,
        method: EnsembleMethod,
        sample_rate_hz: u32,
    ) -> Result<Self, EngineError> {
        assert_eq!(
            members.len(),
            method.weights().len(),
            "one weight per member"
        );
        let algorithm = method.algorithm();
        let plans = Stem::ALL[..NUM_SEPARATED_STEMS]
            .iter()
            .map(|&stem| {
                let delivering: Vec<usize> = (0..members.len())
                    .filter(|&m| members[m].info().delivers_stem(stem))
                    .collect();
                match delivering.as_slice() {
                    [] => StemPlan::Silent,
                    [member] => StemPlan::One(*member),
                    several => {
                        let weights: Vec<f64> =
                            several.iter().map(|&m| method.weights()[m]).collect();
                        let channels =
                            std::array::from_fn(|_| ChannelCombiner::new(algorithm, &weights));
                        StemPlan::Combined(delivering, Box::new(channels))
                    }
                }
            })
            .collect();
        let num_members = members.len();
        let members = members
            .into_iter()
            .map(|member| OfflineStream::new(member, sample_rate_hz))
            .collect::<Result<Vec<_>, _>>()?;
        let delay_frames = delay_samples_of(algorithm);
        Ok(Self {
            members,
            method,
            plans,
            pending: (0..num_members).map(|_| Default::default()).collect(),
            pending_input: Default::default(),
            // The input (2 channels) and every separated stem's two channels.
            delay: PlanarDelay::new(2 + 2 * NUM_SEPARATED_STEMS, delay_frames),
            frames_to_drop: delay_frames,
            scratch: vec![Vec::with_capacity(OFFLINE_BLOCK_FRAMES); num_members],
            combined: Default::default(),
            input_frames: 0,
            output_frames: 0,
        })
    }

    /// How the members' stems combine. Realtime-safe.
    pub fn method(&self) -> &EnsembleMethod {
        &self.method
    }

    /// The slowest member's latency (what the plugin would report, less the combination's
    /// delay). Realtime-safe.
    pub fn latency_samples(&self) -> usize {
        self.members
            .iter()
            .map(OfflineStream::latency_samples)
            .max()
            .unwrap_or(0)
    }

    /// Where six-stem members' guitar and piano go. Realtime-safe.
    pub fn set_extra_stems(&mut self, extra_stems: ExtraStems) {
        for member in &mut self.members {
            member.set_extra_stems(extra_stems);
        }
    }

    /// Samples of the input that were NaN or infinite (treated as silence). Realtime-safe.
    pub fn non_finite_input_samples(&self) -> u64 {
        self.members
            .first()
            .map_or(0, |m| m.stats().non_finite_input_samples())
    }

    /// Separates the next frames with every member and hands the combined stems that became
    /// ready to `sink` (see [`OfflineStream::push`]). Not realtime-safe: waits for the members.
    pub fn push<E: From<EngineError>>(
        &mut self,
        input: StereoInput<'_>,
        mut sink: impl FnMut(StemFrames<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        for (channel, samples) in input.channels().into_iter().enumerate() {
            self.pending_input[channel].extend(samples.iter().map(|&x| sanitize_sample(x)));
        }
        self.input_frames += input.num_frames() as u64;
        for (member, pending) in self.members.iter_mut().zip(&mut self.pending) {
            member.push(input, |frames| {
                queue(pending, &frames);
                Ok::<(), E>(())
            })?;
        }
        self.combine_ready(&mut sink)
    }

    /// Ends the file: flushes every member and hands the rest of the combined stems to `sink`,
    /// the file's end combined as librosa pads it. Not realtime-safe: waits for the members.
    pub fn finish<E: From<EngineError>>(
        &mut self,
        mut sink: impl FnMut(StemFrames<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        for (member, pending) in self.members.iter_mut().zip(&mut self.pending) {
            member.finish(|frames| {
                queue(pending, &frames);
                Ok::<(), E>(())
            })?;
        }
        self.combine_ready(&mut sink)?;
        // What the combination still holds: the delayed input and single stems come out of the
        // delay with silence pushed after them, the combined stems out of `finish`.
        let owed = (self.input_frames - self.output_frames) as usize;
        let flushed = self.frames_to_drop + owed;
        let mut input = [vec![0.0; flushed], vec![0.0; flushed]];
        for (channel, samples) in input.iter_mut().enumerate() {
            self.delay.process(channel, samples);
            samples.drain(..self.frames_to_drop);
        }
        for (stem_index, plan) in self.plans.iter_mut().enumerate() {
            for channel in 0..2 {
                let out = &mut self.combined[stem_index][channel];
                out.clear();
                match plan {
                    StemPlan::Silent => out.resize(owed, 0.0),
                    StemPlan::One(_) => {
                        out.resize(flushed, 0.0);
                        self.delay.process(2 + 2 * stem_index + channel, out);
                        out.drain(..self.frames_to_drop);
                    }
                    StemPlan::Combined(_, combiners) => combiners[channel].finish(out),
                }
                debug_assert_eq!(out.len(), owed);
            }
        }
        self.delay.advance(flushed);
        self.frames_to_drop = 0;
        self.emit_residual(&input, owed);
        let first = self.output_frames;
        self.output_frames += owed as u64;
        if owed > 0 {
            sink(StemFrames::from_stems(&self.combined, 0..owed, first))?;
        }
        Ok(())
    }

    /// Stops the members and hands their separators back, reset, for the next file; `None`
    /// when a member's worker died. Not realtime-safe: joins the workers.
    pub fn into_separators(self) -> Option<Vec<Box<dyn Separator>>> {
        self.members
            .into_iter()
            .map(OfflineStream::into_separator)
            .collect()
    }

    /// Combines the frames every member has delivered, block by block, and hands what comes
    /// out of the combination's delay to `sink`.
    fn combine_ready<E: From<EngineError>>(
        &mut self,
        sink: &mut impl FnMut(StemFrames<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        loop {
            let ready = self
                .pending
                .iter()
                .map(|p| p[0][0].len())
                .min()
                .unwrap_or(0)
                .min(self.pending_input[0].len())
                .min(OFFLINE_BLOCK_FRAMES);
            if ready == 0 {
                return Ok(());
            }
            let mut input = [Vec::with_capacity(ready), Vec::with_capacity(ready)];
            for (channel, samples) in input.iter_mut().enumerate() {
                samples.extend(self.pending_input[channel].drain(..ready));
                self.delay.process(channel, samples);
            }
            for stem_index in 0..NUM_SEPARATED_STEMS {
                self.combine_stem(stem_index, ready);
            }
            self.delay.advance(ready);
            self.emit_residual(&input, ready);
            let dropped = self.frames_to_drop.min(ready);
            self.frames_to_drop -= dropped;
            if dropped < ready {
                let first = self.output_frames;
                self.output_frames += (ready - dropped) as u64;
                sink(StemFrames::from_stems(
                    &self.combined,
                    dropped..ready,
                    first,
                ))?;
            }
        }
    }

    /// Takes `frames` frames of one stem from the members' queues into `combined`.
    fn combine_stem(&mut self, stem_index: usize, frames: usize) {
        for channel in 0..2 {
            let members_of_stem: Vec<usize> = match &self.plans[stem_index] {
                StemPlan::Silent => Vec::new(),
                StemPlan::One(member) => vec![*member],
                StemPlan::Combined(members, _) => members.clone(),
            };
            for (slot, &member) in members_of_stem.iter().enumerate() {
                let scratch = &mut self.scratch[slot];
                scratch.clear();
                scratch.extend(self.pending[member][stem_index][channel].drain(..frames));
            }
            // Stems no plan reads still leave the queues.
            for (member, pending) in self.pending.iter_mut().enumerate() {
                if !members_of_stem.contains(&member) {
                    pending[stem_index][channel].drain(..frames);
                }
            }
            let out = &mut self.combined[stem_index][channel];
            out.clear();
            out.resize(frames, 0.0);
            match &mut self.plans[stem_index] {
                StemPlan::Silent => {}
                StemPlan::One(_) => {
                    out.copy_from_slice(&self.scratch[0]);
                    self.delay.process(2 + 2 * stem_index + channel, out);
                }
                StemPlan::Combined(_, combiners) => {
                    let scratch = &self.scratch;
                    combiners[channel].process(|i| &scratch[i], out);
                }
            }
        }
    }

    /// `Other` for `frames` frames: the (delayed) input minus the combined separated stems.
    fn emit_residual(&mut self, input: &[Vec<f32>; 2], frames: usize) {
        let (separated, other) = self.combined.split_at_mut(NUM_SEPARATED_STEMS);
        for channel in 0..2 {
            let other = &mut other[0][channel];
            other.clear();
            other.extend_from_slice(&input[channel][..frames]);
            for stem in separated.iter() {
                for (o, &s) in other.iter_mut().zip(&stem[channel]) {
                    *o -= s;
                }
            }
        }
    }
}

/// Appends a member's stem frames to its queues.
fn queue(pending: &mut [[VecDeque<f32>; 2]; NUM_STEMS], frames: &StemFrames<'_>) {
    for stem in Stem::ALL {
        for (channel, queue) in pending[stem.index()].iter_mut().enumerate() {
            queue.extend(frames.channel(stem, channel));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::BuiltinSeparator;
    use crate::ensemble::{combine_whole_file, EnsembleAlgorithm};
    use crate::offline::separate;
    use crate::passthrough::PassthroughSeparator;
    use stemflow_kit::demo_song::DemoSong;

    /// The passthrough, delivering vocals only (its input, 3 000 frames late).
    struct VocalsOnly(PassthroughSeparator, crate::separator::SeparatorInfo);

    impl Separator for VocalsOnly {
        fn info(&self) -> &crate::separator::SeparatorInfo {
            &self.1
        }
        fn reset(&mut self) {
            self.0.reset();
        }
        fn process_hop(
            &mut self,
            input: &crate::planar::PlanarBlock,
            stems: &mut crate::planar::PlanarBlock,
        ) -> Result<(), crate::separator::SeparatorError> {
            self.0.process_hop(input, stems)
        }
    }

    fn members() -> Vec<Box<dyn Separator>> {
        let passthrough = PassthroughSeparator::new(44_100, 512, 3_000);
        let info = passthrough
            .info()
            .clone()
            .with_delivered_stems([Stem::Vocals]);
        vec![
            Box::new(BuiltinSeparator::new()),
            Box::new(VocalsOnly(passthrough, info)),
        ]
    }

    /// The ensemble's stems of `input`, pushed in blocks of 7 000 frames.
    fn ensemble(
        method: &EnsembleMethod,
        input: &[Vec<f32>; 2],
        rate: u32,
    ) -> [[Vec<f32>; 2]; NUM_STEMS] {
        let mut stream = EnsembleOfflineStream::new(members(), method.clone(), rate).unwrap();
        let mut stems: [[Vec<f32>; 2]; NUM_STEMS] = Default::default();
        let mut collect = |frames: StemFrames<'_>| -> Result<(), EngineError> {
            assert_eq!(frames.first_frame(), stems[0][0].len() as u64);
            frames.append_to(&mut stems);
            Ok(())
        };
        for block in StereoInput::planar(input).unwrap().chunks(7_000) {
            stream.push(block, &mut collect).unwrap();
        }
        stream.finish(&mut collect).unwrap();
        assert_eq!(stream.into_separators().map(|s| s.len()), Some(2));
        stems
    }

    #[test]
    fn the_stems_are_the_members_files_combined_to_the_last_sample() {
        for (rate, seconds) in [(44_100, 0.7), (48_000, 0.03), (44_100, 0.0)] {
            let song = DemoSong::generate(rate, seconds);
            let input = song.mix();
            let frames = input[0].len();
            let alone: Vec<_> = members()
                .into_iter()
                .map(|member| separate(member, &input, rate).unwrap())
                .collect();
            for algorithm in [
                EnsembleAlgorithm::MaxFft,
                EnsembleAlgorithm::MedianWave,
                EnsembleAlgorithm::AvgFft,
                EnsembleAlgorithm::MinSpec,
            ] {
                let method = EnsembleMethod::new(algorithm, 2, None).unwrap();
                let stems = ensemble(&method, &input, rate);
                for channel in 0..2 {
                    let vocals: Vec<&[f32]> = alone
                        .iter()
                        .map(|a| a.stem(Stem::Vocals)[channel].as_slice())
                        .collect();
                    let expected = combine_whole_file(&method, &vocals);
                    let ours = &stems[Stem::Vocals.index()][channel];
                    assert_eq!(ours.len(), frames, "{algorithm} {rate} Hz");
                    let largest = ours
                        .iter()
                        .zip(&expected)
                        .map(|(a, b)| (a - b).abs())
                        .fold(0.0f32, f32::max);
                    assert!(largest < 1e-6, "{algorithm} {rate} Hz: {largest}");
                    // Drums: the built-in's alone (the other member has none).
                    assert_eq!(
                        stems[Stem::Drums.index()][channel],
                        alone[0].stem(Stem::Drums)[channel],
                        "{algorithm} {rate} Hz"
                    );
                    // Other: the rest of the input.
                    for t in 0..frames {
                        let sum: f32 = Stem::ALL.iter().map(|s| stems[s.index()][channel][t]).sum();
                        assert!((sum - input[channel][t]).abs() < 1e-5, "{algorithm} t {t}");
                    }
                }
            }
        }
    }
}
