//! [`EnsembleSeparator`]: several separators on the same input, their stems combined stem by
//! stem (see the module docs of [`crate::ensemble`]).

use super::method::EnsembleMethod;
use super::stem_combination::StemCombination;
use crate::hybrid::{
    combined_info, combined_result, combined_separator_methods, PlanarDelay, StageRunner,
};
use crate::planar::PlanarBlock;
use crate::separator::{Separator, SeparatorError, SeparatorInfo, SEPARATED_CHANNELS};

/// One member: its separator and its stems of one ensemble hop, delayed to the slowest
/// member's latency.
struct Member {
    runner: StageRunner,
    stems: PlanarBlock,
    delay: PlanarDelay,
}

/// Several separators' stems combined per stem by an [`EnsembleMethod`].
pub struct EnsembleSeparator {
    /// Built from the members' when it is built (theirs are fixed too).
    info: SeparatorInfo,
    method: EnsembleMethod,
    members: Vec<Member>,
    combination: StemCombination,
    /// The slowest member's latency: the members' stems of the input's first frame come out
    /// that late, and the combiners' STFT frames start there, where a file's frames start.
    slowest_latency_frames: usize,
    /// How many of the hops' first frames are still before that.
    frames_before_start: usize,
}

impl EnsembleSeparator {
    /// Combines `members` (at least two, all at one rate) by `method` (whose weights are one
    /// per member). A stem is combined from the members that deliver it (a vocals-only model
    /// adds nothing to drums), with their weights. The latency is the slowest member's, plus
    /// [`super::SPECTRAL_DELAY_SAMPLES`] for the spectral algorithms. Not realtime-safe:
    /// allocates.
    pub fn new(
        name: String,
        method: EnsembleMethod,
        members: Vec<Box<dyn Separator>>,
    ) -> Result<Self, String> {
        if members.len() != method.weights().len() {
            return Err(format!(
                "{} separators for {} weights",
                members.len(),
                method.weights().len()
            ));
        }
        let latencies: Vec<usize> = members.iter().map(|m| m.info().latency_frames()).collect();
        let slowest = latencies.iter().copied().max().unwrap_or(0);
        let combination = StemCombination::new(&method, members.len(), |m, stem| {
            members[m].info().delivers_stem(stem)
        });
        let info = combined_info(
            name,
            members.iter().map(|m| m.info()),
            slowest + combination.delay_frames(),
            combination.delivered_stems(),
        )?;
        let hop_frames = info.hop_frames();
        let members = members
            .into_iter()
            .zip(latencies)
            .map(|(separator, latency)| Member {
                runner: StageRunner::new(separator),
                stems: PlanarBlock::new(SEPARATED_CHANNELS, hop_frames),
                delay: PlanarDelay::new(SEPARATED_CHANNELS, slowest - latency),
            })
            .collect();
        Ok(Self {
            info,
            method,
            members,
            combination,
            slowest_latency_frames: slowest,
            frames_before_start: slowest,
        })
    }

    /// How the members' stems are combined. Realtime-safe.
    pub fn method(&self) -> &EnsembleMethod {
        &self.method
    }
}

impl Separator for EnsembleSeparator {
    combined_separator_methods!(members);

    fn process_hop(
        &mut self,
        input: &PlanarBlock,
        stems: &mut PlanarBlock,
    ) -> Result<(), SeparatorError> {
        // Before the input's first frame every member's stems are silent; the combiners start
        // with it.
        let skip = self.frames_before_start.min(self.info.hop_frames());
        self.frames_before_start -= skip;
        let frames = self.info.hop_frames();
        let mut first_error = None;
        for member in &mut self.members {
            if let Err(error) = member.runner.run(input, frames, &mut member.stems) {
                first_error.get_or_insert(error);
            }
            for channel in 0..SEPARATED_CHANNELS {
                member
                    .delay
                    .process(channel, member.stems.channel_mut(channel));
            }
            member.delay.advance(frames);
        }
        let members = &self.members;
        self.combination.process(
            |member, index| members[member].stems.channel(index),
            skip,
            frames,
            stems,
        );
        combined_result(self.info.name(), first_error)
    }

    fn reset(&mut self) {
        self.frames_before_start = self.slowest_latency_frames;
        for member in &mut self.members {
            member.runner.separator.reset();
            member.delay.reset();
        }
        self.combination.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ensemble::{combine_whole_file, EnsembleAlgorithm, SPECTRAL_DELAY_SAMPLES};
    use crate::separator::stem_channel;
    use crate::stem::Stem;
    use stemflow_kit::testing::XorShift64;

    /// A toy member: vocals are `gain·x + echo·x[t − 7]` and drums `−gain·x`, delivered
    /// `latency` frames late; bass only when `has_bass` (`x` squared).
    struct Toy {
        info: SeparatorInfo,
        delay: PlanarDelay,
        gain: f32,
        echo: f32,
        previous: [[f32; 7]; 2],
    }

    impl Toy {
        fn new(hop: usize, latency: usize, gain: f32, echo: f32, has_bass: bool) -> Self {
            let stems = [Stem::Vocals, Stem::Drums]
                .into_iter()
                .chain(has_bass.then_some(Stem::Bass));
            Self {
                info: SeparatorInfo::new("toy", 44_100, hop, latency).with_delivered_stems(stems),
                delay: PlanarDelay::new(SEPARATED_CHANNELS, latency),
                gain,
                echo,
                previous: [[0.0; 7]; 2],
            }
        }
    }

    impl Separator for Toy {
        fn info(&self) -> &SeparatorInfo {
            &self.info
        }
        fn reset(&mut self) {
            self.delay.reset();
            self.previous = [[0.0; 7]; 2];
        }
        fn process_hop(
            &mut self,
            input: &PlanarBlock,
            stems: &mut PlanarBlock,
        ) -> Result<(), SeparatorError> {
            stems.clear();
            let has_bass = self.info.delivers_stem(Stem::Bass);
            for channel in 0..2 {
                for (t, &x) in input.channel(channel).iter().enumerate() {
                    let history = &mut self.previous[channel];
                    let echoed = history[t % 7];
                    history[t % 7] = x;
                    stems.channel_mut(stem_channel(0, channel))[t] =
                        self.gain * x + self.echo * echoed;
                    stems.channel_mut(stem_channel(1, channel))[t] = -self.gain * x;
                    if has_bass {
                        stems.channel_mut(stem_channel(2, channel))[t] = x * x;
                    }
                }
            }
            for channel in 0..SEPARATED_CHANNELS {
                self.delay.process(channel, stems.channel_mut(channel));
            }
            self.delay.advance(self.info.hop_frames());
            Ok(())
        }
    }

    fn toys() -> Vec<Box<dyn Separator>> {
        vec![
            Box::new(Toy::new(256, 700, 1.0, 0.5, true)),
            Box::new(Toy::new(384, 1500, 0.6, -0.8, false)),
            Box::new(Toy::new(128, 0, 0.9, 0.1, false)),
        ]
    }

    /// Runs `separator` over `input` followed by enough silence for its latency; returns the
    /// separated stems of the input's frames, `[channel][frame]` laid out by [`stem_channel`].
    fn separate(separator: &mut dyn Separator, input: &[Vec<f32>; 2]) -> Vec<Vec<f32>> {
        let hop = separator.info().hop_frames();
        let latency = separator.info().latency_frames();
        let frames = input[0].len();
        let mut block = PlanarBlock::new(2, hop);
        let mut stems = PlanarBlock::new(SEPARATED_CHANNELS, hop);
        let mut out = vec![Vec::new(); SEPARATED_CHANNELS];
        let mut start = 0;
        while out[0].len() < latency + frames {
            for channel in 0..2 {
                for (i, sample) in block.channel_mut(channel).iter_mut().enumerate() {
                    *sample = input[channel].get(start + i).copied().unwrap_or(0.0);
                }
            }
            separator.process_hop(&block, &mut stems).unwrap();
            for (channel, out) in out.iter_mut().enumerate() {
                out.extend_from_slice(stems.channel(channel));
            }
            start += hop;
        }
        out.into_iter()
            .map(|channel| channel[latency..latency + frames].to_vec())
            .collect()
    }

    #[test]
    fn latency_is_the_slowest_members_plus_the_combinations() {
        for (algorithm, extra) in [
            (EnsembleAlgorithm::MaxWave, 0),
            (EnsembleAlgorithm::MaxFft, SPECTRAL_DELAY_SAMPLES),
        ] {
            let method = EnsembleMethod::new(algorithm, 3, None).unwrap();
            let ensemble = EnsembleSeparator::new("e".into(), method, toys()).unwrap();
            assert_eq!(ensemble.info().latency_frames(), 1500 + extra);
            assert_eq!(ensemble.info().hop_frames(), 768);
            assert!(ensemble.info().delivers_stem(Stem::Bass));
            assert!(!ensemble.info().delivers_stem(Stem::Guitar));
        }
    }

    #[test]
    fn a_stream_equals_the_whole_file_combination_before_the_last_frames() {
        let mut rng = XorShift64::new(0x2545_f491);
        let input = [rng.samples(12_000, 0.5), rng.samples(12_000, 0.5)];
        let alone: Vec<Vec<Vec<f32>>> = toys()
            .iter_mut()
            .map(|member| separate(member.as_mut(), &input))
            .collect();
        for algorithm in EnsembleAlgorithm::ALL {
            let weights = algorithm.uses_weights().then(|| vec![2.0, 1.0, 0.5]);
            let method = EnsembleMethod::new(algorithm, 3, weights).unwrap();
            let mut ensemble = EnsembleSeparator::new("e".into(), method.clone(), toys()).unwrap();
            let streamed = separate(&mut ensemble, &input);
            // Exact to the end for the samples; the spectral frames that reach past the end
            // see the members' stems of the silence after it, not librosa's zeros.
            let compared = if algorithm.is_spectral() {
                12_000 - SPECTRAL_DELAY_SAMPLES
            } else {
                12_000
            };
            for channel in 0..2 {
                let index = stem_channel(Stem::Vocals.index(), channel);
                let members: Vec<&[f32]> = alone.iter().map(|m| m[index].as_slice()).collect();
                let whole = combine_whole_file(&method, &members);
                let largest = streamed[index][..compared]
                    .iter()
                    .zip(&whole)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0f32, f32::max);
                assert!(largest < 1e-6, "{algorithm}: {largest}");
                assert!(whole.iter().any(|x| x.abs() > 0.1), "{algorithm}: silent");
                let at_end = streamed[index][compared..]
                    .iter()
                    .zip(&whole[compared..])
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0f32, f32::max);
                let peak = whole.iter().fold(0.0f32, |m, x| m.max(x.abs()));
                println!(
                    "{algorithm}: the last 2048 samples differ by {at_end:.1e} (peak {peak:.2})"
                );
                // Bass comes from the first member alone, unchanged.
                let bass = stem_channel(Stem::Bass.index(), channel);
                assert_eq!(streamed[bass], alone[0][bass], "{algorithm}");
            }
        }
    }
}
