//! [`EnsembleRun`]: an ensemble over a whole file — every member a whole-file run of its own
//! (exactly what `stemflow separate --model MEMBER` computes), their stems
//! combined by the ensemble's [`StemCombination`] as MSST's `ensemble.py` combines the members'
//! files: to the file's last sample, its end padded as librosa pads it. The members take the
//! file in lockstep, so memory does not grow with its length.

use crate::ensemble::{EnsembleMethod, StemCombination};
use crate::hybrid::{combined_file_info, PlanarDelay};
use crate::planar::PlanarBlock;
use crate::runtime::devices::ActiveDevice;
use crate::separator::{SeparatorError, SeparatorInfo, SEPARATED_CHANNELS};

use super::file_run::{FileRun, FrameQueue, MIX_PLANE, OTHER_PLANE};

/// Most frames combined at once: bounds the scratch blocks.
const COMBINED_BLOCK_FRAMES: usize = 16_384;

/// An ensemble's members over a whole file, combined: each a [`FileRun`] at the ensemble's
/// rate (a route's stage: the members' own runs at the model's rate; a whole ensemble: the
/// members as they separate the file alone, at its rate).
pub struct EnsembleRun<M = Box<dyn FileRun>> {
    info: SeparatorInfo,
    members: Vec<M>,
    combination: StemCombination,
    /// The input, delayed as the combined stems are.
    mix_delay: PlanarDelay,
    /// One block of combined stems, and of the delayed input.
    stems: PlanarBlock,
    mix: [Vec<f32>; 2],
    /// Frames the members handed out and the combination took, and how many of the
    /// combination's first (its delay) are still to be dropped.
    combined_frames: u64,
    frames_to_drop: usize,
    output: FrameQueue,
}

impl<M: FileRun> EnsembleRun<M> {
    /// Combines `members` (one per weight of `method`, all at one rate) under `name`. Not
    /// realtime-safe: allocates.
    pub fn new(name: String, method: &EnsembleMethod, members: Vec<M>) -> Result<Self, String> {
        if members.len() != method.weights().len() {
            return Err(format!(
                "{} separators for {} weights",
                members.len(),
                method.weights().len()
            ));
        }
        let combination = StemCombination::new(method, members.len(), |m, stem| {
            members[m].info().delivers_stem(stem)
        });
        let info = combined_file_info(
            name,
            members.iter().map(|m| m.info()),
            combination.delivered_stems(),
        )?;
        let delay_frames = combination.delay_frames();
        Ok(Self {
            info,
            members,
            combination,
            mix_delay: PlanarDelay::new(2, delay_frames),
            stems: PlanarBlock::new(SEPARATED_CHANNELS, COMBINED_BLOCK_FRAMES),
            mix: [Vec::new(), Vec::new()],
            combined_frames: 0,
            frames_to_drop: delay_frames,
            output: FrameQueue::new(),
        })
    }

    /// The members, for the next file.
    pub fn into_members(self) -> Vec<M> {
        self.members
    }

    /// Combines what every member handed out, block by block, and hands out what leaves the
    /// combination's delay.
    fn combine_ready(&mut self) {
        loop {
            let ready = self
                .members
                .iter_mut()
                .map(|member| member.output().len())
                .min()
                .unwrap_or(0)
                .min(COMBINED_BLOCK_FRAMES);
            if ready == 0 {
                return;
            }
            let queues: Vec<&FrameQueue> = self
                .members
                .iter_mut()
                .map(|member| &*member.output())
                .collect();
            self.combination.process(
                |member, index| &queues[member].plane(index)[..ready],
                0,
                ready,
                &mut self.stems,
            );
            // Every member separated the same input: the first one's is the ensemble's.
            for (channel, mix) in self.mix.iter_mut().enumerate() {
                mix.clear();
                mix.extend_from_slice(&queues[0].plane(MIX_PLANE + channel)[..ready]);
                self.mix_delay.process(channel, mix);
            }
            self.mix_delay.advance(ready);
            for member in &mut self.members {
                member.output().consume(ready);
            }
            self.combined_frames += ready as u64;
            let dropped = self.frames_to_drop.min(ready);
            self.frames_to_drop -= dropped;
            for index in 0..SEPARATED_CHANNELS {
                self.output
                    .plane_mut(index)
                    .extend_from_slice(&self.stems.channel(index)[dropped..ready]);
            }
            self.hand_out_mix(dropped..ready);
        }
    }

    /// Appends `range` of the delayed input block to the mix planes, and a silent model
    /// `Other` (an ensemble's is the residual).
    fn hand_out_mix(&mut self, range: std::ops::Range<usize>) {
        for channel in 0..2 {
            self.output
                .plane_mut(MIX_PLANE + channel)
                .extend_from_slice(&self.mix[channel][range.clone()]);
            let other = self.output.plane_mut(OTHER_PLANE + channel);
            other.resize(other.len() + range.len(), 0.0);
        }
    }

    /// The file ended and every member's frames were combined: hands out the frames the
    /// combination still delays.
    fn flush(&mut self) {
        let delay_frames = self.combination.delay_frames();
        let owed = (self.combined_frames as usize).min(delay_frames);
        let mut stems = vec![Vec::new(); SEPARATED_CHANNELS];
        self.combination.finish(owed, &mut stems);
        for (index, stem) in stems.iter().enumerate() {
            self.output.plane_mut(index).extend_from_slice(stem);
        }
        for mix in &mut self.mix {
            mix.clear();
            mix.resize(delay_frames, 0.0);
        }
        for (channel, mix) in self.mix.iter_mut().enumerate() {
            self.mix_delay.process(channel, mix);
        }
        self.mix_delay.reset();
        self.hand_out_mix(delay_frames - owed..delay_frames);
    }
}

impl<M: FileRun> FileRun for EnsembleRun<M> {
    fn info(&self) -> &SeparatorInfo {
        &self.info
    }

    fn device(&self) -> Option<ActiveDevice> {
        self.members.iter().find_map(|member| member.device())
    }

    fn model_runs(&self) -> u64 {
        self.members.iter().map(|member| member.model_runs()).sum()
    }

    fn has_model_other(&self) -> bool {
        false
    }

    fn start(&mut self) {
        for member in &mut self.members {
            member.start();
        }
        self.combination.reset();
        self.mix_delay.reset();
        self.combined_frames = 0;
        self.frames_to_drop = self.combination.delay_frames();
        self.output.clear();
    }

    fn push(&mut self, left: &[f32], right: &[f32]) -> Result<(), SeparatorError> {
        for member in &mut self.members {
            member.push(left, right)?;
        }
        self.combine_ready();
        Ok(())
    }

    fn finish(&mut self) -> Result<(), SeparatorError> {
        for member in &mut self.members {
            member.finish()?;
        }
        self.combine_ready();
        self.flush();
        Ok(())
    }

    fn output(&mut self) -> &mut FrameQueue {
        &mut self.output
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::BuiltinSeparator;
    use crate::ensemble::{combine_whole_file, EnsembleAlgorithm};
    use crate::passthrough::PassthroughSeparator;
    use crate::planar::PlanarBlock;
    use crate::separator::{stem_channel, Separator};
    use crate::stem::Stem;
    use crate::whole_file::hop_run::HopRun;
    use stemflow_kit::demo_song::DemoSong;

    /// The passthrough, delivering vocals only (its input, 3 000 frames late).
    struct VocalsOnly(PassthroughSeparator, SeparatorInfo);

    impl Separator for VocalsOnly {
        fn info(&self) -> &SeparatorInfo {
            &self.1
        }
        fn reset(&mut self) {
            self.0.reset();
        }
        fn process_hop(
            &mut self,
            input: &PlanarBlock,
            stems: &mut PlanarBlock,
        ) -> Result<(), SeparatorError> {
            self.0.process_hop(input, stems)
        }
    }

    fn members() -> Vec<Box<dyn FileRun>> {
        let passthrough = PassthroughSeparator::new(44_100, 512, 3_000);
        let info = passthrough
            .info()
            .clone()
            .with_delivered_stems([Stem::Vocals]);
        vec![
            Box::new(HopRun::new(Box::new(BuiltinSeparator::new()))),
            Box::new(HopRun::new(Box::new(VocalsOnly(passthrough, info)))),
        ]
    }

    /// Every plane `run` hands out for `input`, pushed in blocks of 7 000 frames.
    fn run_file(run: &mut dyn FileRun, input: &[Vec<f32>; 2]) -> Vec<Vec<f32>> {
        run.start();
        let mut planes = vec![Vec::new(); super::super::file_run::NUM_PLANES];
        let mut take = |run: &mut dyn FileRun| {
            let output = run.output();
            for (index, plane) in planes.iter_mut().enumerate() {
                plane.extend_from_slice(output.plane(index));
            }
            output.clear();
        };
        for (left, right) in input[0].chunks(7_000).zip(input[1].chunks(7_000)) {
            run.push(left, right).unwrap();
            take(&mut *run);
        }
        run.finish().unwrap();
        take(&mut *run);
        planes
    }

    #[test]
    fn the_stems_are_the_members_files_combined_to_the_last_sample() {
        for (seconds, algorithm) in [
            (0.7, EnsembleAlgorithm::MaxFft),
            (0.7, EnsembleAlgorithm::MedianWave),
            (0.03, EnsembleAlgorithm::AvgFft),
            (0.0, EnsembleAlgorithm::MinSpec),
            (0.7, EnsembleAlgorithm::MinSpec),
        ] {
            let input = DemoSong::generate(44_100, seconds).mix();
            let frames = input[0].len();
            let alone: Vec<Vec<Vec<f32>>> = members()
                .into_iter()
                .map(|mut member| run_file(member.as_mut(), &input))
                .collect();
            let method = EnsembleMethod::new(algorithm, 2, None).unwrap();
            let mut ensemble = EnsembleRun::new("e".into(), &method, members()).unwrap();
            // Twice: a second file starts afresh.
            for _ in 0..2 {
                let planes = run_file(&mut ensemble, &input);
                for channel in 0..2 {
                    let vocals = stem_channel(Stem::Vocals.index(), channel);
                    let members: Vec<&[f32]> = alone.iter().map(|a| &a[vocals][..]).collect();
                    let expected = combine_whole_file(&method, &members);
                    assert_eq!(planes[vocals].len(), frames, "{algorithm} {seconds} s");
                    let largest = planes[vocals]
                        .iter()
                        .zip(&expected)
                        .map(|(a, b)| (a - b).abs())
                        .fold(0.0f32, f32::max);
                    assert!(largest < 1e-6, "{algorithm} {seconds} s: {largest}");
                    // Drums: the built-in's alone (the other member has none), unchanged.
                    let drums = stem_channel(Stem::Drums.index(), channel);
                    assert_eq!(planes[drums], alone[0][drums], "{algorithm}");
                    // The input, as every member hands it out.
                    assert_eq!(planes[MIX_PLANE + channel], input[channel], "{algorithm}");
                    assert!(planes[OTHER_PLANE + channel].iter().all(|&x| x == 0.0));
                }
            }
        }
    }

    #[test]
    fn members_of_other_rates_or_a_weight_too_many_are_refused() {
        let method = EnsembleMethod::new(EnsembleAlgorithm::AvgWave, 3, None).unwrap();
        let error = EnsembleRun::new("e".into(), &method, members())
            .err()
            .unwrap();
        assert!(error.contains("2 separators for 3 weights"), "{error}");
        let method = EnsembleMethod::new(EnsembleAlgorithm::AvgWave, 2, None).unwrap();
        let other_rate: Vec<Box<dyn FileRun>> = vec![
            Box::new(HopRun::new(Box::new(BuiltinSeparator::new()))),
            Box::new(HopRun::new(Box::new(PassthroughSeparator::new(
                48_000, 512, 0,
            )))),
        ];
        let error = EnsembleRun::new("e".into(), &method, other_rate)
            .err()
            .unwrap();
        assert!(error.contains("must share a rate"), "{error}");
    }
}
