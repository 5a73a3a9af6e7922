//! [`StemCombination`]: how an ensemble makes each separated stem from its members' — silent
//! where no member delivers it, one member's own (delayed as the combined stems are) where one
//! does, the members' combined channel by channel where several do. Written once for the
//! plugin's [`super::EnsembleSeparator`] (hop by hop) and the whole-file ensemble
//! (`whole_file/ensemble_run.rs`, to the file's last sample).

use super::channel_combiner::{delay_samples_of, ChannelCombiner};
use super::method::EnsembleMethod;
use crate::hybrid::PlanarDelay;
use crate::planar::PlanarBlock;
use crate::separator::stem_channel;
use crate::stem::{Stem, NUM_SEPARATED_STEMS};

/// How one separated stem is made.
enum StemPlan {
    /// No member delivers it.
    Silent,
    /// One member delivers it: its stem, delayed as the combined stems are.
    One { member: usize, delay: PlanarDelay },
    /// Several do: their stems combined, channel by channel.
    Combined {
        members: Vec<usize>,
        channels: Box<[ChannelCombiner; 2]>,
    },
}

/// Every separated stem's plan of an ensemble.
pub(crate) struct StemCombination {
    plans: Vec<StemPlan>,
    delay_frames: usize,
}

impl StemCombination {
    /// The plans of `num_members` members combined by `method` (one weight per member), where
    /// `delivers(member, stem)` says which member delivers which stem: a stem is combined from
    /// the members that deliver it, with their weights. Not realtime-safe: allocates.
    pub(crate) fn new(
        method: &EnsembleMethod,
        num_members: usize,
        delivers: impl Fn(usize, Stem) -> bool,
    ) -> Self {
        let algorithm = method.algorithm();
        let delay_frames = delay_samples_of(algorithm);
        let plans = Stem::ALL[..NUM_SEPARATED_STEMS]
            .iter()
            .map(|&stem| {
                let delivering: Vec<usize> =
                    (0..num_members).filter(|&m| delivers(m, stem)).collect();
                match delivering.as_slice() {
                    [] => StemPlan::Silent,
                    [member] => StemPlan::One {
                        member: *member,
                        delay: PlanarDelay::new(2, delay_frames),
                    },
                    several => {
                        let weights: Vec<f64> =
                            several.iter().map(|&m| method.weights()[m]).collect();
                        StemPlan::Combined {
                            members: delivering,
                            channels: Box::new(std::array::from_fn(|_| {
                                ChannelCombiner::new(algorithm, &weights)
                            })),
                        }
                    }
                }
            })
            .collect();
        Self {
            plans,
            delay_frames,
        }
    }

    /// How much later than the members' stems the combined stems come out. Realtime-safe.
    pub(crate) fn delay_frames(&self) -> usize {
        self.delay_frames
    }

    /// The separated stems some member delivers. Realtime-safe.
    pub(crate) fn delivered_stems(&self) -> impl Iterator<Item = Stem> + '_ {
        Stem::ALL[..NUM_SEPARATED_STEMS]
            .iter()
            .zip(&self.plans)
            .filter(|(_, plan)| !matches!(plan, StemPlan::Silent))
            .map(|(&stem, _)| stem)
    }

    /// Combines the next `frames` frames of the members' separated stems — `member(m, index)`
    /// is member `m`'s channel `index` (laid out by [`stem_channel`]), at least `frames` long —
    /// into `stems`' first `frames` frames (the rest is cleared), [`Self::delay_frames`] late.
    /// The combiners start at frame `skip` (before it the members' stems precede the input's
    /// first frame, where a file's STFT frames start). Realtime-safe.
    pub(crate) fn process<'a>(
        &mut self,
        member: impl Fn(usize, usize) -> &'a [f32],
        skip: usize,
        frames: usize,
        stems: &mut PlanarBlock,
    ) {
        stems.clear();
        for (stem_index, plan) in self.plans.iter_mut().enumerate() {
            match plan {
                StemPlan::Silent => {}
                StemPlan::One { member: m, delay } => {
                    for channel in 0..2 {
                        let index = stem_channel(stem_index, channel);
                        let out = &mut stems.channel_mut(index)[..frames];
                        out.copy_from_slice(&member(*m, index)[..frames]);
                        delay.process(channel, out);
                    }
                    delay.advance(frames);
                }
                StemPlan::Combined { members, channels } => {
                    for (channel, combiner) in channels.iter_mut().enumerate() {
                        let index = stem_channel(stem_index, channel);
                        combiner.process(
                            |i| &member(members[i], index)[skip..frames],
                            &mut stems.channel_mut(index)[skip..frames],
                        );
                    }
                }
            }
        }
    }

    /// Ends a whole file: the `owed` combined frames still delayed (the file's last, as many
    /// as were pushed up to [`Self::delay_frames`]), computed as librosa computes a file's last
    /// frames, appended to `stems[index]` (laid out by [`stem_channel`], cleared first). The
    /// combination then starts over. Not realtime-safe: grows the vectors.
    pub(crate) fn finish(&mut self, owed: usize, stems: &mut [Vec<f32>]) {
        // What the delay lines still hold before the owed frames: silence from before the
        // file's first frame, when it was shorter than the delay.
        let unfilled = self.delay_frames - owed;
        for (stem_index, plan) in self.plans.iter_mut().enumerate() {
            for channel in 0..2 {
                let out = &mut stems[stem_channel(stem_index, channel)];
                out.clear();
                match plan {
                    StemPlan::Silent => out.resize(owed, 0.0),
                    StemPlan::One { delay, .. } => {
                        out.resize(self.delay_frames, 0.0);
                        delay.process(channel, out);
                        out.drain(..unfilled);
                    }
                    StemPlan::Combined { channels, .. } => channels[channel].finish(out),
                }
                debug_assert_eq!(out.len(), owed);
            }
        }
        self.reset();
    }

    /// Forgets everything, as if new. Realtime-safe.
    pub(crate) fn reset(&mut self) {
        for plan in &mut self.plans {
            match plan {
                StemPlan::Silent => {}
                StemPlan::One { delay, .. } => delay.reset(),
                StemPlan::Combined { channels, .. } => {
                    channels.iter_mut().for_each(ChannelCombiner::reset)
                }
            }
        }
    }
}
