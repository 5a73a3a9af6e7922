//! [`StemSink`]: where the pipeline writes finished stem frames — the free space of the
//! worker's output ring (two slices where it wraps), or a plain buffer — so each frame is
//! written once, where the audio thread reads it; [`StemFrameLayout`]: what a frame holds.

use std::mem::MaybeUninit;

use crate::stem::NUM_SEPARATED_STEMS;

/// What one interleaved stem frame holds: the separated stems a separator delivers, left and
/// right, in [`crate::Stem::ALL`] order. `Other` is not in it: the audio side computes it as the
/// exact residual of its own delayed input, so the ring carries no channel it can work out,
/// and a separator without guitar and piano sends three stems instead of five.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StemFrameLayout {
    /// Vocals, drums, bass: 6 samples a frame (guitar and piano are silent).
    ThreeStems,
    /// Vocals, drums, bass, guitar, piano: 10 samples a frame (six-stem models).
    FiveStems,
}

impl StemFrameLayout {
    /// The layout for a separator that does or does not deliver guitar and piano.
    pub const fn for_separator(has_extra_stems: bool) -> Self {
        if has_extra_stems {
            Self::FiveStems
        } else {
            Self::ThreeStems
        }
    }

    /// The stems a frame carries: the first of [`crate::Stem::ALL`].
    pub const fn num_stems(self) -> usize {
        match self {
            Self::ThreeStems => 3,
            Self::FiveStems => NUM_SEPARATED_STEMS,
        }
    }

    /// Samples per frame: the carried stems × 2 channels. Each is the separator's channel of
    /// the same index ([`crate::separator::stem_channel`]).
    pub const fn frame_samples(self) -> usize {
        self.num_stems() * 2
    }
}

/// Room for interleaved stem frames (of one [`StemFrameLayout`]) in up to two slices, filled in
/// order. The room may be uninitialised (a ring buffer's free slots): the frames handed out by
/// [`StemSink::next_runs`] are written by whoever takes them, so the first
/// [`StemSink::written_frames`] frames are initialised. Realtime-safe: never allocates.
pub struct StemSink<'a> {
    parts: [&'a mut [MaybeUninit<f32>]; 2],
    frame_samples: usize,
    written_frames: usize,
}

impl<'a> StemSink<'a> {
    /// Room in `first`, then `second`, for frames of `layout`; each holds whole frames.
    pub fn new(
        first: &'a mut [MaybeUninit<f32>],
        second: &'a mut [MaybeUninit<f32>],
        layout: StemFrameLayout,
    ) -> Self {
        let frame_samples = layout.frame_samples();
        assert!(
            first.len().is_multiple_of(frame_samples) && second.len().is_multiple_of(frame_samples),
            "a stem sink holds whole frames"
        );
        Self {
            parts: [first, second],
            frame_samples,
            written_frames: 0,
        }
    }

    /// Frames written so far.
    pub fn written_frames(&self) -> usize {
        self.written_frames
    }

    /// Frames that still fit.
    pub fn free_frames(&self) -> usize {
        (self.parts[0].len() + self.parts[1].len()) / self.frame_samples - self.written_frames
    }

    /// The slots of the next `num_frames` frames, which count as written, as at most two runs
    /// of consecutive frames (the second where the room wraps), in order. The caller writes
    /// every slot of them: the ring that owns the room publishes them as they are.
    ///
    /// # Panics
    /// If fewer than `num_frames` frames fit (the caller sizes the room from the pipeline's
    /// [`crate::pipeline::StemPipeline::max_output_frames_per_chunk`]).
    pub fn next_runs(&mut self, num_frames: usize) -> [&mut [MaybeUninit<f32>]; 2] {
        assert!(
            num_frames <= self.free_frames(),
            "{num_frames} stem frames do not fit in {}",
            self.free_frames()
        );
        let start = self.written_frames * self.frame_samples;
        let end = start + num_frames * self.frame_samples;
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
    use crate::interleave::{initialised_room, room_values};

    /// The layout the tests use, and its frame width.
    const LAYOUT: StemFrameLayout = StemFrameLayout::ThreeStems;
    const FRAME: usize = LAYOUT.frame_samples();

    /// The frames of a sink's runs, one by one.
    fn frames(runs: [&mut [MaybeUninit<f32>]; 2]) -> impl Iterator<Item = &mut [MaybeUninit<f32>]> {
        runs.into_iter().flat_map(|run| run.chunks_exact_mut(FRAME))
    }

    #[test]
    fn frames_fill_the_first_part_then_the_second_in_order() {
        let mut first = initialised_room(2 * FRAME, 0.0);
        let mut second = initialised_room(3 * FRAME, 0.0);
        let mut sink = StemSink::new(&mut first, &mut second, LAYOUT);
        assert_eq!(sink.free_frames(), 5);
        for (value, frame) in [1.0, 2.0, 3.0].into_iter().zip(frames(sink.next_runs(3))) {
            frame.fill(MaybeUninit::new(value));
        }
        for frame in frames(sink.next_runs(1)) {
            frame.fill(MaybeUninit::new(4.0));
        }
        assert_eq!((sink.written_frames(), sink.free_frames()), (4, 1));
        let frame_values = |part: &[f32]| -> Vec<f32> {
            part.chunks_exact(FRAME)
                .map(|frame| {
                    assert!(frame.iter().all(|&x| x == frame[0]));
                    frame[0]
                })
                .collect()
        };
        assert_eq!(frame_values(&room_values(&first)), [1.0, 2.0]);
        assert_eq!(frame_values(&room_values(&second)), [3.0, 4.0, 0.0]);
    }

    #[test]
    fn runs_split_where_the_room_wraps() {
        let mut first = initialised_room(3 * FRAME, 0.0);
        let mut second = initialised_room(3 * FRAME, 0.0);
        let mut sink = StemSink::new(&mut first, &mut second, LAYOUT);
        let run_frames = |runs: [&mut [MaybeUninit<f32>]; 2]| runs.map(|run| run.len() / FRAME);
        assert_eq!(run_frames(sink.next_runs(2)), [2, 0]);
        assert_eq!(run_frames(sink.next_runs(3)), [1, 2]);
        assert_eq!(run_frames(sink.next_runs(1)), [0, 1]);
        assert_eq!(run_frames(sink.next_runs(0)), [0, 0]);
        assert_eq!(sink.free_frames(), 0);
    }

    #[test]
    #[should_panic(expected = "do not fit")]
    fn more_frames_than_fit_is_refused() {
        let mut first = initialised_room(FRAME, 0.0);
        let mut sink = StemSink::new(&mut first, &mut [], LAYOUT);
        let _ = sink.next_runs(2);
    }
}
