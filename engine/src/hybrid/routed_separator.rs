//! [`RoutedSeparator`]: separators chained stem by stem (see the module docs of
//! [`crate::hybrid`]).

use crate::dsp::gcd;
use crate::planar::PlanarBlock;
use crate::runtime::devices::{ActiveDevice, DeviceEvent};
use crate::separator::{
    stem_channel, Separator, SeparatorError, SeparatorInfo, SeparatorRequest, SEPARATED_CHANNELS,
};
use crate::stem::{Stem, NUM_SEPARATED_STEMS};

/// Largest router hop accepted (the least common multiple of the stages' hops).
const MAX_HOP_FRAMES: usize = 1 << 18;

/// A fixed delay of planar channels. Realtime-safe after `new`.
struct PlanarDelay {
    buffers: Vec<Vec<f32>>,
    position: usize,
}

impl PlanarDelay {
    fn new(num_channels: usize, delay_frames: usize) -> Self {
        Self {
            buffers: vec![vec![0.0; delay_frames]; num_channels],
            position: 0,
        }
    }

    /// Replaces `samples` of `channel` by what went in `delay` frames earlier. All channels
    /// must be processed with the same lengths, in order, before [`PlanarDelay::advance`].
    fn process(&mut self, channel: usize, samples: &mut [f32]) {
        let buffer = &mut self.buffers[channel];
        if buffer.is_empty() {
            return;
        }
        let mut position = self.position;
        for sample in samples {
            std::mem::swap(sample, &mut buffer[position]);
            position = (position + 1) % buffer.len();
        }
    }

    fn advance(&mut self, num_frames: usize) {
        if let Some(len) = self.buffers.first().map(Vec::len).filter(|&l| l > 0) {
            self.position = (self.position + num_frames) % len;
        }
    }

    fn reset(&mut self) {
        for buffer in &mut self.buffers {
            buffer.fill(0.0);
        }
        self.position = 0;
    }
}

/// The rate every stage of a route runs at (`infos`: theirs, in order); an error naming two
/// that differ, or for a route without stages. Not realtime-safe: allocates the message.
pub fn shared_rate<'a>(
    mut infos: impl Iterator<Item = &'a SeparatorInfo> + Clone,
) -> Result<u32, String> {
    let Some(first) = infos.clone().next() else {
        return Err("a route needs at least one separator".into());
    };
    let rate = first.sample_rate_hz();
    match infos.find(|info| info.sample_rate_hz() != rate) {
        Some(other) => Err(format!(
            "{} runs at {} Hz and {} at {rate} Hz: a route's separators must share a rate",
            other.name(),
            other.sample_rate_hz(),
            first.name()
        )),
        None => Ok(rate),
    }
}

/// One separator of the chain and the stems it serves.
struct Stage {
    separator: Box<dyn Separator>,
    /// Which separated stems ([`Stem::index`] < [`NUM_SEPARATED_STEMS`]) come from it.
    serves: [bool; NUM_SEPARATED_STEMS],
    /// Its input, one hop of its own, and its stems.
    input: PlanarBlock,
    stems: PlanarBlock,
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
        let sample_rate_hz = shared_rate(stages.iter().map(|(s, _)| s.info()))?;
        let mut hop_frames = 1usize;
        for (separator, _) in &stages {
            let hop = separator.info().hop_frames().max(1);
            hop_frames = hop_frames / gcd(hop_frames, hop) * hop;
            if hop_frames > MAX_HOP_FRAMES {
                return Err(format!(
                    "the separators' hops ({}) have no common multiple up to {MAX_HOP_FRAMES} frames",
                    stages
                        .iter()
                        .map(|(s, _)| s.info().hop_frames().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        let latencies: Vec<usize> = stages
            .iter()
            .map(|(s, _)| s.info().latency_frames())
            .collect();
        let latency_frames = latencies.iter().sum();
        let num_stages = stages.len();
        let stages: Vec<Stage> = stages
            .into_iter()
            .enumerate()
            .map(|(index, (separator, stems))| {
                let mut serves = [false; NUM_SEPARATED_STEMS];
                for stem in stems {
                    if stem.index() < NUM_SEPARATED_STEMS {
                        serves[stem.index()] = true;
                    }
                }
                let hop = separator.info().hop_frames().max(1);
                let later: usize = latencies[index + 1..].iter().sum();
                Stage {
                    input: PlanarBlock::new(2, hop),
                    stems: PlanarBlock::new(SEPARATED_CHANNELS, hop),
                    input_delay: PlanarDelay::new(2, latencies[index]),
                    output_delay: PlanarDelay::new(SEPARATED_CHANNELS, later),
                    separator,
                    serves,
                }
            })
            .collect();
        let infos = || stages.iter().map(|stage| stage.separator.info());
        let info = SeparatorInfo::new(name, sample_rate_hz, hop_frames, latency_frames)
            // The stages run one after the other on the worker.
            .with_scheduling_margin_frames(
                infos().map(SeparatorInfo::scheduling_margin_frames).sum(),
            )
            .with_predicted_real_time_factor(
                infos()
                    .filter_map(SeparatorInfo::predicted_real_time_factor)
                    .reduce(|a, b| a + b),
            )
            // The costliest stage dominates a route (the built-in stages cost little).
            .with_compute_factor(
                infos()
                    .map(SeparatorInfo::compute_factor)
                    .fold(1.0, f64::max),
            )
            .with_delivered_stems(Stem::ALL.into_iter().filter(|&stem| {
                stem != Stem::Other
                    && stages.iter().any(|stage| {
                        stage.serves[stem.index()] && stage.separator.info().delivers_stem(stem)
                    })
            }))
            .with_float16(infos().any(SeparatorInfo::is_float16));
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
    fn info(&self) -> &SeparatorInfo {
        &self.info
    }

    fn model_runs(&self) -> u64 {
        self.stages.iter().map(|s| s.separator.model_runs()).sum()
    }

    fn reset(&mut self) {
        for stage in &mut self.stages {
            stage.separator.reset();
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
            let hop = stage.input.num_frames();
            for start in (0..frames).step_by(hop) {
                for channel in 0..2 {
                    stage
                        .input
                        .channel_mut(channel)
                        .copy_from_slice(&self.carried.channel(channel)[start..start + hop]);
                }
                if let Err(error) = stage.separator.process_hop(&stage.input, &mut stage.stems) {
                    first_error.get_or_insert(error);
                }
                for channel in 0..SEPARATED_CHANNELS {
                    stage_stems.channel_mut(channel)[start..start + hop]
                        .copy_from_slice(stage.stems.channel(channel));
                }
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
        match first_error {
            None => Ok(()),
            Some(error) => Err(SeparatorError {
                separator: self.info.name().to_owned(),
                reason: error.to_string(),
            }),
        }
    }

    fn request(&mut self, request: SeparatorRequest) {
        for stage in &mut self.stages {
            stage.separator.request(request.clone());
        }
    }

    fn poll_events(&mut self, events: &mut dyn FnMut(DeviceEvent)) {
        for stage in &mut self.stages {
            stage.separator.poll_events(events);
        }
    }

    fn device(&self) -> Option<ActiveDevice> {
        self.stages.iter().find_map(|s| s.separator.device())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::BuiltinSeparator;
    use crate::passthrough::PassthroughSeparator;

    /// A separator whose vocals are half its input, delayed by `latency` frames.
    struct HalfVocals {
        info: SeparatorInfo,
        delay: PlanarDelay,
    }

    impl HalfVocals {
        fn new(hop: usize, latency: usize) -> Self {
            Self {
                info: SeparatorInfo::new("half vocals", 44_100, hop, latency),
                delay: PlanarDelay::new(2, latency),
            }
        }
    }

    impl Separator for HalfVocals {
        fn info(&self) -> &SeparatorInfo {
            &self.info
        }
        fn reset(&mut self) {
            self.delay.reset();
        }
        fn process_hop(
            &mut self,
            input: &PlanarBlock,
            stems: &mut PlanarBlock,
        ) -> Result<(), SeparatorError> {
            stems.clear();
            for channel in 0..2 {
                let out = stems.channel_mut(stem_channel(Stem::Vocals.index(), channel));
                out.copy_from_slice(input.channel(channel));
                self.delay.process(channel, out);
                for x in out.iter_mut() {
                    *x *= 0.5;
                }
                // Drums too, which the route does not take from this stage.
                let drums: Vec<f32> = out.to_vec();
                stems
                    .channel_mut(stem_channel(Stem::Drums.index(), channel))
                    .copy_from_slice(&drums);
            }
            self.delay.advance(self.info.hop_frames());
            Ok(())
        }
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

    fn noise(frames: usize) -> [Vec<f32>; 2] {
        let mut state = 0x1234_5678u32;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state as f32 / u32::MAX as f32 - 0.5
        };
        [
            (0..frames).map(|_| next()).collect(),
            (0..frames).map(|_| next()).collect(),
        ]
    }

    #[test]
    fn the_second_stage_splits_what_the_first_left_and_latencies_add_up() {
        let first = HalfVocals::new(256, 700);
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
            vec![(Box::new(HalfVocals::new(256, 0)), vec![Stem::Vocals])],
        )
        .unwrap();
        assert_eq!(delivered(&vocals_only), [Stem::Vocals, Stem::Other]);
        // The built-in serves guitar and piano here, but has none.
        let hybrid = RoutedSeparator::new(
            "hybrid".into(),
            vec![
                (Box::new(HalfVocals::new(256, 0)), vec![Stem::Vocals]),
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
            let mut first = HalfVocals::new(256, 700);
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
        let mut at_48k = HalfVocals::new(64, 0);
        at_48k.info = SeparatorInfo::new("48k", 48_000, 64, 0);
        let error = RoutedSeparator::new(
            "mixed".into(),
            vec![
                (Box::new(HalfVocals::new(64, 0)), vec![Stem::Vocals]),
                (Box::new(at_48k), vec![Stem::Drums]),
            ],
        )
        .err()
        .unwrap();
        assert!(error.contains("48000 Hz"), "{error}");
    }
}
