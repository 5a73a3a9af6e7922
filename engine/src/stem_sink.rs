//! [`StemSink`]: where the pipeline writes finished stem frames — the free space of the
//! worker's output ring (two slices where it wraps), or a plain buffer — so each frame is
//! written once, where the audio thread reads it.

use crate::stem::STEM_FRAME_SAMPLES;

/// Room for interleaved stem frames ([`STEM_FRAME_SAMPLES`] samples each) in up to two slices,
/// filled in order. Realtime-safe: never allocates.
pub struct StemSink<'a> {
    parts: [&'a mut [f32]; 2],
    written_frames: usize,
}

impl<'a> StemSink<'a> {
    /// Room in `first`, then `second`; each holds whole frames.
    pub fn new(first: &'a mut [f32], second: &'a mut [f32]) -> Self {
        assert!(
            first.len().is_multiple_of(STEM_FRAME_SAMPLES)
                && second.len().is_multiple_of(STEM_FRAME_SAMPLES),
            "a stem sink holds whole frames"
        );
        Self {
            parts: [first, second],
            written_frames: 0,
        }
    }

    /// Frames written so far.
    pub fn written_frames(&self) -> usize {
        self.written_frames
    }

    /// Frames that still fit.
    pub fn free_frames(&self) -> usize {
        (self.parts[0].len() + self.parts[1].len()) / STEM_FRAME_SAMPLES - self.written_frames
    }

    /// The slots of the next `num_frames` frames, which count as written, as at most two runs
    /// of consecutive frames (the second where the room wraps), in order.
    ///
    /// # Panics
    /// If fewer than `num_frames` frames fit (the caller sizes the room from the pipeline's
    /// [`crate::pipeline::StemPipeline::max_output_frames_per_chunk`]).
    pub fn next_runs(&mut self, num_frames: usize) -> [&mut [f32]; 2] {
        assert!(
            num_frames <= self.free_frames(),
            "{num_frames} stem frames do not fit in {}",
            self.free_frames()
        );
        let start = self.written_frames * STEM_FRAME_SAMPLES;
        let end = start + num_frames * STEM_FRAME_SAMPLES;
        self.written_frames += num_frames;
        let [first, second] = &mut self.parts;
        let first_len = first.len();
        let in_first = &mut first[start.min(first_len)..end.min(first_len)];
        let in_second = &mut second[start.saturating_sub(first_len)..end.saturating_sub(first_len)];
        [in_first, in_second]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The frames of a sink's runs, one by one.
    fn frames(runs: [&mut [f32]; 2]) -> impl Iterator<Item = &mut [f32]> {
        runs.into_iter()
            .flat_map(|run| run.chunks_exact_mut(STEM_FRAME_SAMPLES))
    }

    #[test]
    fn frames_fill_the_first_part_then_the_second_in_order() {
        let mut first = vec![0.0; 2 * STEM_FRAME_SAMPLES];
        let mut second = vec![0.0; 3 * STEM_FRAME_SAMPLES];
        let mut sink = StemSink::new(&mut first, &mut second);
        assert_eq!(sink.free_frames(), 5);
        for (value, frame) in [1.0, 2.0, 3.0].into_iter().zip(frames(sink.next_runs(3))) {
            frame.fill(value);
        }
        for frame in frames(sink.next_runs(1)) {
            frame.fill(4.0);
        }
        assert_eq!((sink.written_frames(), sink.free_frames()), (4, 1));
        let frame_values = |part: &[f32]| -> Vec<f32> {
            part.chunks_exact(STEM_FRAME_SAMPLES)
                .map(|frame| {
                    assert!(frame.iter().all(|&x| x == frame[0]));
                    frame[0]
                })
                .collect()
        };
        assert_eq!(frame_values(&first), [1.0, 2.0]);
        assert_eq!(frame_values(&second), [3.0, 4.0, 0.0]);
    }

    #[test]
    fn runs_split_where_the_room_wraps() {
        let mut first = vec![0.0; 3 * STEM_FRAME_SAMPLES];
        let mut second = vec![0.0; 3 * STEM_FRAME_SAMPLES];
        let mut sink = StemSink::new(&mut first, &mut second);
        let run_frames = |runs: [&mut [f32]; 2]| runs.map(|run| run.len() / STEM_FRAME_SAMPLES);
        assert_eq!(run_frames(sink.next_runs(2)), [2, 0]);
        assert_eq!(run_frames(sink.next_runs(3)), [1, 2]);
        assert_eq!(run_frames(sink.next_runs(1)), [0, 1]);
        assert_eq!(run_frames(sink.next_runs(0)), [0, 0]);
        assert_eq!(sink.free_frames(), 0);
    }

    #[test]
    #[should_panic(expected = "do not fit")]
    fn more_frames_than_fit_is_refused() {
        let mut first = vec![0.0; STEM_FRAME_SAMPLES];
        let mut sink = StemSink::new(&mut first, &mut []);
        let _ = sink.next_runs(2);
    }
}
