//! [`PaddedSignal`]: the file as it arrives, read as the reference's padded signal (its
//! [`FilePadding`] before and after it, silence beyond), keeping only what later chunks and
//! stems still need.

use crate::families::file_edges::{FileLength, FilePadding, Fill};

/// The file's frames received so far, and its padding once decided.
#[derive(Debug, Default)]
pub struct PaddedSignal {
    /// File frames `[base, base + len)`, planar stereo.
    channels: [Vec<f32>; 2],
    base: usize,
    /// Frames received.
    received: usize,
    /// The file's length, once it ended.
    total: Option<usize>,
    padding: Option<FilePadding>,
}

impl PaddedSignal {
    /// Forgets the file.
    pub fn clear(&mut self) {
        for channel in &mut self.channels {
            channel.clear();
        }
        self.base = 0;
        self.received = 0;
        self.total = None;
        self.padding = None;
    }

    /// Appends the next frames.
    pub fn push(&mut self, left: &[f32], right: &[f32]) {
        debug_assert!(self.total.is_none());
        self.channels[0].extend_from_slice(left);
        self.channels[1].extend_from_slice(right);
        self.received += left.len();
    }

    /// Marks the end of the file.
    pub fn finish(&mut self) {
        self.total = Some(self.received);
    }

    /// What is known of the length.
    pub fn length(&self) -> FileLength {
        match self.total {
            Some(n) => FileLength::Exactly(n),
            None => FileLength::AtLeast(self.received),
        }
    }

    /// The padding, once decided.
    pub fn padding(&self) -> Option<FilePadding> {
        self.padding
    }

    /// Decides the padding.
    pub fn set_padding(&mut self, padding: FilePadding) {
        self.padding = Some(padding);
    }

    /// File frame `t` of `channel`; silence past the end of a file that ended.
    pub fn file_frame(&self, channel: usize, t: usize) -> f32 {
        if self.total.is_some_and(|n| t >= n) {
            return 0.0;
        }
        debug_assert!(t >= self.base && t < self.received, "frame {t} is gone");
        self.channels[channel][t - self.base]
    }

    /// Reads `out.len()` frames of `channel` of the padded signal from `start` (negative:
    /// silence before it). The padding must be decided.
    pub fn read(&self, channel: usize, start: isize, out: &mut [f32]) {
        let padding = self
            .padding
            .expect("the padding is decided before a chunk runs");
        let lead = padding.lead_frames as isize;
        let reflect = padding.fill == Fill::Reflect;
        for (offset, value) in out.iter_mut().enumerate() {
            let u = start + offset as isize;
            let t = u - lead;
            *value = if u < 0 {
                0.0
            } else if t < 0 {
                if reflect {
                    self.file_frame(channel, (-t) as usize)
                } else {
                    0.0
                }
            } else {
                let t = t as usize;
                match self.total {
                    Some(n) if t >= n => {
                        let beyond = t - n;
                        if reflect && beyond < padding.tail_frames && n >= beyond + 2 {
                            self.file_frame(channel, n - 2 - beyond)
                        } else {
                            0.0
                        }
                    }
                    _ => self.file_frame(channel, t),
                }
            };
        }
    }

    /// Drops the frames before file frame `keep_from`, once that frees at least as much as it
    /// keeps (so the kept frames move a bounded number of times per frame).
    pub fn forget_before(&mut self, keep_from: usize) {
        let keep_from = keep_from.min(self.received);
        let drop = keep_from.saturating_sub(self.base);
        let kept = self.received - keep_from;
        if drop == 0 || drop < kept {
            return;
        }
        for channel in &mut self.channels {
            channel.drain(..drop);
        }
        self.base = keep_from;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signal(frames: usize, padding: FilePadding, ended: bool) -> PaddedSignal {
        let mut signal = PaddedSignal::default();
        let x: Vec<f32> = (0..frames).map(|t| t as f32 + 1.0).collect();
        signal.push(&x, &x);
        if ended {
            signal.finish();
        }
        signal.set_padding(padding);
        signal
    }

    #[test]
    fn reflect_padding_mirrors_both_ends_without_the_edge_frame() {
        // File 1 2 3 4 5, reflected by 2: 3 2 | 1 2 3 4 5 | 4 3 | then silence.
        let padding = FilePadding {
            lead_frames: 2,
            tail_frames: 2,
            fill: Fill::Reflect,
        };
        let signal = signal(5, padding, true);
        let mut out = [9.0; 12];
        signal.read(0, -1, &mut out);
        assert_eq!(
            out,
            [0.0, 3.0, 2.0, 1.0, 2.0, 3.0, 4.0, 5.0, 4.0, 3.0, 0.0, 0.0]
        );
    }

    #[test]
    fn zero_padding_and_forgetting_keep_the_frames_still_read() {
        let mut signal = signal(100, FilePadding::zeros(3), false);
        let mut out = [9.0; 5];
        signal.read(1, 0, &mut out);
        assert_eq!(out, [0.0, 0.0, 0.0, 1.0, 2.0]);
        signal.forget_before(40); // would free 40 and keep 60: not yet
        signal.forget_before(60);
        signal.read(1, 63, &mut out);
        assert_eq!(out, [61.0, 62.0, 63.0, 64.0, 65.0]);
        signal.finish();
        signal.read(0, 101, &mut out);
        assert_eq!(out, [99.0, 100.0, 0.0, 0.0, 0.0]);
    }
}
