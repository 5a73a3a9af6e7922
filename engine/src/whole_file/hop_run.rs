//! [`HopRun`]: a separator without whole-file edges of its own (the built-in) run over a whole
//! file hop by hop, as a stream runs it, with its latency taken off: the stems of the file's
//! frames, in the file's timeline.

use crate::planar::PlanarBlock;
use crate::runtime::devices::ActiveDevice;
use crate::separator::{
    stem_channel, Separator, SeparatorError, SeparatorInfo, SEPARATED_CHANNELS,
};

use super::file_run::{FileRun, FrameQueue, MIX_PLANE, OTHER_PLANE};

/// A hop-by-hop separator over a whole file.
pub struct HopRun {
    separator: Box<dyn Separator>,
    input: PlanarBlock,
    stems: PlanarBlock,
    /// Input frames not yet a whole hop.
    pending: [Vec<f32>; 2],
    /// Input frames from the next one handed out on, for the mix planes.
    mix: [Vec<f32>; 2],
    /// Frames received, and the file's length once it ended.
    received: usize,
    total: Option<usize>,
    /// Separator output frames so far (the first `latency` are before the file).
    produced: usize,
    output: FrameQueue,
}

impl HopRun {
    /// Runs `separator`. Not realtime-safe: allocates.
    pub fn new(separator: Box<dyn Separator>) -> Self {
        let hop = separator.info().hop_frames().max(1);
        Self {
            input: PlanarBlock::new(2, hop),
            stems: PlanarBlock::new(SEPARATED_CHANNELS, hop),
            pending: [Vec::new(), Vec::new()],
            mix: [Vec::new(), Vec::new()],
            received: 0,
            total: None,
            produced: 0,
            output: FrameQueue::new(),
            separator,
        }
    }

    /// Runs every whole hop pending.
    fn run_hops(&mut self) -> Result<(), SeparatorError> {
        let hop = self.input.num_frames();
        let latency = self.separator.info().latency_frames();
        let mut taken = 0;
        while self.pending[0].len() - taken >= hop {
            for channel in 0..2 {
                self.input
                    .channel_mut(channel)
                    .copy_from_slice(&self.pending[channel][taken..taken + hop]);
            }
            taken += hop;
            self.separator.process_hop(&self.input, &mut self.stems)?;
            // Output frame `j` holds the stems of input frame `j − latency`.
            let first = self.produced;
            self.produced += hop;
            let skip = latency.saturating_sub(first).min(hop);
            let limit = self.total.map_or(usize::MAX, |n| n + latency);
            let end = hop.min(limit.saturating_sub(first));
            if end > skip {
                self.hand_out(skip, end);
            }
        }
        for channel in &mut self.pending {
            channel.drain(..taken);
        }
        Ok(())
    }

    /// Hands out frames `skip..end` of the last hop's stems.
    fn hand_out(&mut self, skip: usize, end: usize) {
        let frames = end - skip;
        for stem in 0..SEPARATED_CHANNELS / 2 {
            for channel in 0..2 {
                let index = stem_channel(stem, channel);
                self.output
                    .plane_mut(index)
                    .extend_from_slice(&self.stems.channel(index)[skip..end]);
            }
        }
        for channel in 0..2 {
            let other = self.output.plane_mut(OTHER_PLANE + channel);
            other.resize(other.len() + frames, 0.0);
            let mix = &mut self.mix[channel];
            let available = frames.min(mix.len());
            let plane = self.output.plane_mut(MIX_PLANE + channel);
            plane.extend_from_slice(&mix[..available]);
            plane.resize(plane.len() + frames - available, 0.0);
            mix.drain(..available);
        }
    }
}

impl FileRun for HopRun {
    fn info(&self) -> &SeparatorInfo {
        self.separator.info()
    }

    fn device(&self) -> Option<ActiveDevice> {
        self.separator.device()
    }

    fn model_runs(&self) -> u64 {
        self.separator.model_runs()
    }

    fn has_model_other(&self) -> bool {
        false
    }

    fn start(&mut self) {
        self.separator.reset();
        for channel in self.pending.iter_mut().chain(&mut self.mix) {
            channel.clear();
        }
        self.received = 0;
        self.total = None;
        self.produced = 0;
        self.output.clear();
    }

    fn push(&mut self, left: &[f32], right: &[f32]) -> Result<(), SeparatorError> {
        for (channel, samples) in [left, right].into_iter().enumerate() {
            self.pending[channel].extend_from_slice(samples);
            self.mix[channel].extend_from_slice(samples);
        }
        self.received += left.len();
        self.run_hops()
    }

    fn finish(&mut self) -> Result<(), SeparatorError> {
        self.total = Some(self.received);
        let needed = self.received + self.separator.info().latency_frames();
        let hop = self.input.num_frames();
        // Silence after the file, in whole hops, until its last frame's stems are out.
        let wanted = needed.saturating_sub(self.produced).div_ceil(hop) * hop;
        for channel in &mut self.pending {
            channel.resize(wanted.max(channel.len()), 0.0);
        }
        self.run_hops()
    }

    fn output(&mut self) -> &mut FrameQueue {
        &mut self.output
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::BuiltinSeparator;
    use crate::offline::separate;
    use crate::stem::{Stem, NUM_SEPARATED_STEMS};
    use stemflow_kit::demo_song::DemoSong;

    #[test]
    fn a_dsp_separator_hop_by_hop_equals_its_stream() {
        for seconds in [0.0, 0.01, 1.3] {
            let input = DemoSong::generate(44_100, seconds).mix();
            let streamed = separate(Box::new(BuiltinSeparator::new()), &input, 44_100).unwrap();
            let mut run = HopRun::new(Box::new(BuiltinSeparator::new()));
            run.start();
            for (left, right) in input[0].chunks(5_000).zip(input[1].chunks(5_000)) {
                run.push(left, right).unwrap();
            }
            run.finish().unwrap();
            let output = run.output();
            assert_eq!(output.len(), input[0].len(), "{seconds} s");
            for stem in &Stem::ALL[..NUM_SEPARATED_STEMS] {
                for channel in 0..2 {
                    assert_eq!(
                        output.plane(stem_channel(stem.index(), channel)),
                        &streamed.stem(*stem)[channel][..],
                        "{stem:?} {seconds} s"
                    );
                }
            }
            for channel in 0..2 {
                assert_eq!(output.plane(MIX_PLANE + channel), &input[channel][..]);
            }
        }
    }
}
