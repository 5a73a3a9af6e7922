//! [`RoutedSeparator`]: separators chained stem by stem (see the module docs of
//! [`crate::hybrid`]).

use super::planar_delay::PlanarDelay;
use super::stage_runner::{
    combined_info, combined_result, combined_separator_methods, StageRunner,
};
use crate::planar::PlanarBlock;
use crate::separator::{
    stem_channel, Separator, SeparatorError, SeparatorInfo, SEPARATED_CHANNELS,
};
use crate::stem::{Stem, NUM_SEPARATED_STEMS};

/// One separator of the chain and the stems it serves.
struct Stage {
    runner: StageRunner,
    /// Which separated stems ([`Stem::index`] < [`NUM_SEPARATED_STEMS`]) come from it.
    serves: [bool; NUM_SEPARATED_STEMS],
    /// The chain's input to this stage delayed by this stage's latency, to subtract its stems
    /// from.
    input_delay: PlanarDelay,
    /// This stage's served stems delayed by the latencies of the stages after it.
    output_delay: PlanarDelay,
}

/// Separators chained stem by stem; see [`crate::hybrid`].
pub struct RoutedSeparator {
    /// Built from its stages' when it is built (theirs are fixed too).
    info: SeparatorInfo,
    stages: Vec<Stage>,
    /// The signal passed from stage to stage, one router hop.
    carried: PlanarBlock,
    /// Each stage's served stems for one router hop.
    stage_stems: Vec<PlanarBlock>,
}

impl RoutedSeparator {
    /// Chains `stages` (`separator`, the stems it serves). Every separator must run at the same
    /// rate; the router's hop is the least common multiple of theirs. Not realtime-safe:
    /// allocates.
    pub fn new(name: String, stages: Vec<(Box<dyn Separator>, Vec<Stem>)>) -> Result<Self, String> {
        if stages.is_empty() {
            return Err("a route needs at least one separator".into());
        }
        let latencies: Vec<usize> = stages
            .iter()
            .map(|(s, _)| s.info().latency_frames())
            .collect();
        let serves: Vec<[bool; NUM_SEPARATED_STEMS]> = stages
            .iter()
            .map(|(_, stems)| {
                let mut serves = [false; NUM_SEPARATED_STEMS];
                for stem in stems {
                    if stem.index() < NUM_SEPARATED_STEMS {
                        serves[stem.index()] = true;
                    }
                }
                serves
            })
            .collect();
        let delivered = Stem::ALL.into_iter().filter(|&stem| {
            stem != Stem::Other
                && stages.iter().zip(&serves).any(|((separator, _), serves)| {
                    serves[stem.index()] && separator.info().delivers_stem(stem)
                })
        });
        let info = combined_info(
            name,
            stages.iter().map(|(s, _)| s.info()),
            latencies.iter().sum(),
            delivered.collect::<Vec<_>>(),
        )?;
        let hop_frames = info.hop_frames();
        let num_stages = stages.len();
        let stages: Vec<Stage> = stages
            .into_iter()
            .zip(serves)
            .enumerate()
            .map(|(index, ((separator, _), serves))| Stage {
                runner: StageRunner::new(separator),
                serves,
                input_delay: PlanarDelay::new(2, latencies[index]),
                output_delay: PlanarDelay::new(
                    SEPARATED_CHANNELS,
                    latencies[index + 1..].iter().sum(),
                ),
            })
            .collect();
        Ok(Self {
            info,
            stage_stems: (0..num_stages)
                .map(|_| PlanarBlock::new(SEPARATED_CHANNELS, hop_frames))
                .collect(),
            carried: PlanarBlock::new(2, hop_frames),
            stages,
        })
    }
}

impl Separator for RoutedSeparator {
    combined_separator_methods!(stages);

    fn reset(&mut self) {
        for stage in &mut self.stages {
            stage.runner.separator.reset();
            stage.input_delay.reset();
            stage.output_delay.reset();
        }
    }

    fn process_hop(
        &mut self,
        input: &PlanarBlock,
        stems: &mut PlanarBlock,
    ) -> Result<(), SeparatorError> {
        let frames = self.info.hop_frames();
        for channel in 0..2 {
            self.carried
                .channel_mut(channel)
                .copy_from_slice(&input.channel(channel)[..frames]);
        }
        let mut first_error = None;
        for (stage, stage_stems) in self.stages.iter_mut().zip(&mut self.stage_stems) {
            if let Err(error) = stage.runner.run(&self.carried, frames, stage_stems) {
                first_error.get_or_insert(error);
            }
            // What this stage leaves: its input, delayed to line up with its stems, minus the
            // stems it serves. That is the next stage's input.
            for channel in 0..2 {
                stage
                    .input_delay
                    .process(channel, self.carried.channel_mut(channel));
                for (stem_index, &serves) in stage.serves.iter().enumerate() {
                    let served = stage_stems.channel(stem_channel(stem_index, channel));
                    for (carried, &s) in self.carried.channel_mut(channel).iter_mut().zip(served) {
                        if serves {
                            *carried -= s;
                        }
                    }
                }
            }
            stage.input_delay.advance(frames);
            // Served stems wait for the stages after this one; the others are dropped.
            for stem_index in 0..NUM_SEPARATED_STEMS {
                for channel in 0..2 {
                    let index = stem_channel(stem_index, channel);
                    let samples = stage_stems.channel_mut(index);
                    if !stage.serves[stem_index] {
                        samples.fill(0.0);
                    }
                    stage.output_delay.process(index, samples);
                }
            }
            stage.output_delay.advance(frames);
        }
        stems.clear();
        for stage_stems in &self.stage_stems {
            for channel in 0..SEPARATED_CHANNELS {
                for (out, &s) in stems.channel_mut(channel)[..frames]
                    .iter_mut()
                    .zip(stage_stems.channel(channel))
                {
                    *out += s;
                }
            }
        }
        combined_result(self.info.name(), first_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::BuiltinSeparator;
    use crate::dsp::gcd;
    use crate::passthrough::PassthroughSeparator;
    use crate::testing::Scripted;
    use stemflow_kit::testing::XorShift64;

    /// A separator whose vocals are half its input, delayed by `latency` frames; its drums too,
    /// which the route does not take from this stage.
    fn half_vocals(hop: usize, latency: usize) -> Scripted<PassthroughSeparator> {
        Scripted::around(PassthroughSeparator::new(44_100, hop, latency))
            .named("half vocals")
            .after_hop(|stems| {
                for channel in 0..2 {
                    let out = stems.channel_mut(stem_channel(Stem::Vocals.index(), channel));
                    for x in out.iter_mut() {
                        *x *= 0.5;
                    }
                    let drums: Vec<f32> = out.to_vec();
                    stems
                        .channel_mut(stem_channel(Stem::Drums.index(), channel))
                        .copy_from_slice(&drums);
                }
            })
    }

    /// Runs `separator` over `input` (stereo), returning the separated stems, planar.
    fn run(separator: &mut dyn Separator, input: &[Vec<f32>; 2]) -> Vec<Vec<f32>> {
        let hop = separator.info().hop_frames();
        let mut block = PlanarBlock::new(2, hop);
        let mut stems = PlanarBlock::new(SEPARATED_CHANNELS, hop);
        let mut out = vec![Vec::new(); SEPARATED_CHANNELS];
        for start in (0..input[0].len() / hop * hop).step_by(hop) {
            for channel in 0..2 {
                block
                    .channel_mut(channel)
                    .copy_from_slice(&input[channel][start..start + hop]);
            }
            separator.process_hop(&block, &mut stems).unwrap();
            for (channel, out) in out.iter_mut().enumerate() {
                out.extend_from_slice(stems.channel(channel));
            }
        }
        out
    }

    /// Stereo test noise, uniform in ±0.5.
    fn noise(frames: usize) -> [Vec<f32>; 2] {
        let mut rng = XorShift64::new(0x1234_5678);
        [rng.samples(frames, 0.5), rng.samples(frames, 0.5)]
    }

    #[test]
    fn the_second_stage_splits_what_the_first_left_and_latencies_add_up() {
        let first = half_vocals(256, 700);
        let second = BuiltinSeparator::new();
        let (second_latency, second_hop) =
            (second.info().latency_frames(), second.info().hop_frames());
        let mut routed = RoutedSeparator::new(
            "test".into(),
            vec![
                (Box::new(first), vec![Stem::Vocals]),
                (
                    Box::new(second),
                    vec![Stem::Drums, Stem::Bass, Stem::Guitar, Stem::Piano],
                ),
            ],
        )
        .unwrap();
        assert_eq!(routed.info().latency_frames(), 700 + second_latency);
        assert_eq!(
            routed.info().hop_frames(),
            256 / gcd(256, second_hop) * second_hop
        );
        let input = noise(44_100);
        let stems = run(&mut routed, &input);
        let latency = routed.info().latency_frames();
        let n = stems[0].len();
        for channel in 0..2 {
            // Vocals: half the input, delayed by the whole chain.
            let vocals = &stems[stem_channel(Stem::Vocals.index(), channel)];
            for t in latency..n {
                assert!(
                    (vocals[t] - 0.5 * input[channel][t - latency]).abs() < 1e-6,
                    "t={t}"
                );
            }
        }
        // The second stage separates exactly what the first left: half the input, delayed by
        // the first stage's latency. The first stage's own drums are not taken.
        let left_over: [Vec<f32>; 2] = std::array::from_fn(|channel| {
            (0..input[channel].len())
                .map(|t| {
                    if t >= 700 {
                        0.5 * input[channel][t - 700]
                    } else {
                        0.0
                    }
                })
                .collect()
        });
        let alone = run(&mut BuiltinSeparator::new(), &left_over);
        for stem in [Stem::Drums, Stem::Bass, Stem::Guitar, Stem::Piano] {
            for channel in 0..2 {
                let index = stem_channel(stem.index(), channel);
                let len = alone[index].len().min(n);
                assert_eq!(
                    stems[index][..len],
                    alone[index][..len],
                    "{stem:?} ch {channel}"
                );
            }
        }
        let drums = &stems[stem_channel(Stem::Drums.index(), 0)];
        assert!(
            drums[latency..].iter().any(|&x| x.abs() > 1e-4),
            "silent drums"
        );
    }

    #[test]
    fn a_route_delivers_the_stems_its_stages_serve_and_have() {
        let delivered = |routed: &RoutedSeparator| -> Vec<Stem> {
            Stem::ALL
                .into_iter()
                .filter(|&stem| routed.info().delivers_stem(stem))
                .collect()
        };
        let vocals_only = RoutedSeparator::new(
            "vocals".into(),
            vec![(Box::new(half_vocals(256, 0)), vec![Stem::Vocals])],
        )
        .unwrap();
        assert_eq!(delivered(&vocals_only), [Stem::Vocals, Stem::Other]);
        // The built-in serves guitar and piano here, but has none.
        let hybrid = RoutedSeparator::new(
            "hybrid".into(),
            vec![
                (Box::new(half_vocals(256, 0)), vec![Stem::Vocals]),
                (
                    Box::new(BuiltinSeparator::new()),
                    vec![Stem::Drums, Stem::Bass, Stem::Guitar, Stem::Piano],
                ),
            ],
        )
        .unwrap();
        assert_eq!(
            delivered(&hybrid),
            [Stem::Vocals, Stem::Drums, Stem::Bass, Stem::Other]
        );
        assert!(!hybrid.info().has_extra_stems());
    }

    #[test]
    fn a_route_is_float16_when_one_of_its_models_is() {
        let route = |is_float16: bool| {
            let mut first = half_vocals(256, 700);
            first.info = first.info.with_float16(is_float16);
            let stages: Vec<(Box<dyn Separator>, Vec<Stem>)> = vec![
                (Box::new(BuiltinSeparator::new()), vec![Stem::Drums]),
                (Box::new(first), vec![Stem::Vocals]),
            ];
            RoutedSeparator::new("route".into(), stages).unwrap()
        };
        assert!(!route(false).info().is_float16());
        assert!(route(true).info().is_float16());
    }

    #[test]
    fn a_route_of_one_passthrough_is_the_passthrough() {
        let mut routed = RoutedSeparator::new(
            "one".into(),
            vec![(
                Box::new(PassthroughSeparator::new(44_100, 512, 300)),
                vec![Stem::Vocals],
            )],
        )
        .unwrap();
        let mut plain = PassthroughSeparator::new(44_100, 512, 300);
        let input = noise(8192);
        assert_eq!(run(&mut routed, &input), run(&mut plain, &input));
    }

    #[test]
    fn separators_at_different_rates_are_refused() {
        let mut at_48k = half_vocals(64, 0);
        at_48k.info = SeparatorInfo::new("48k", 48_000, 64, 0);
        let error = RoutedSeparator::new(
            "mixed".into(),
            vec![
                (Box::new(half_vocals(64, 0)), vec![Stem::Vocals]),
                (Box::new(at_48k), vec![Stem::Drums]),
            ],
        )
        .err()
        .unwrap();
        assert!(error.contains("48000 Hz"), "{error}");
    }
}
