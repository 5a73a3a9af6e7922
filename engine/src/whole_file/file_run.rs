//! [`FileRun`]: what separates a whole file at its own rate — a model with its reference's
//! edges, a route of them, or a DSP separator hop by hop — and [`FrameQueue`], the final frames
//! it hands out. The file goes in as it is decoded; the stems of each frame come out, in
//! order, once no later input changes them.

use crate::runtime::devices::ActiveDevice;
use crate::separator::{SeparatorError, SeparatorInfo};
use crate::stem::NUM_SEPARATED_STEMS;

/// The planes of a [`FrameQueue`]: stem `s` channel `c` at `2·s + c` for the separated stems,
/// then the model's own `Other` ([`OTHER_PLANE`]) and the input ([`MIX_PLANE`]).
pub const NUM_PLANES: usize = 2 * NUM_SEPARATED_STEMS + 4;
/// First plane of the model's own `Other` (silent where [`FileRun::has_model_other`] is false).
pub const OTHER_PLANE: usize = 2 * NUM_SEPARATED_STEMS;
/// First plane of the input the frames were separated from.
pub const MIX_PLANE: usize = OTHER_PLANE + 2;

/// Frames handed out by a [`FileRun`]: [`NUM_PLANES`] planar channels of equal length.
#[derive(Debug)]
pub struct FrameQueue {
    planes: Vec<Vec<f32>>,
}

impl Default for FrameQueue {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameQueue {
    /// An empty queue. Not realtime-safe: allocates.
    pub fn new() -> Self {
        Self {
            planes: vec![Vec::new(); NUM_PLANES],
        }
    }

    /// Frames waiting.
    pub fn len(&self) -> usize {
        self.planes[0].len()
    }

    /// Whether no frame waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One plane's waiting frames.
    pub fn plane(&self, plane: usize) -> &[f32] {
        &self.planes[plane]
    }

    /// One plane, to append to (every plane must grow by as many frames).
    pub fn plane_mut(&mut self, plane: usize) -> &mut Vec<f32> {
        &mut self.planes[plane]
    }

    /// Drops the first `frames` frames.
    pub fn consume(&mut self, frames: usize) {
        for plane in &mut self.planes {
            if frames >= plane.len() {
                plane.clear();
            } else {
                plane.drain(..frames);
            }
        }
    }

    /// Forgets every frame.
    pub fn clear(&mut self) {
        self.consume(usize::MAX);
    }
}

/// A whole-file separator at its own rate. Not realtime-safe: every call may run a model.
pub trait FileRun: Send {
    /// What it is (rate, stems delivered, name).
    fn info(&self) -> &SeparatorInfo;

    /// The device its model runs on; `None` for DSP.
    fn device(&self) -> Option<ActiveDevice>;

    /// Chunks its models ran since it was built.
    fn model_runs(&self) -> u64;

    /// Whether [`OTHER_PLANE`] holds the model's own `Other`.
    fn has_model_other(&self) -> bool;

    /// Forgets the last file: the next frames pushed start a new one.
    fn start(&mut self);

    /// The next frames of the file (both channels as long), separated as far as they allow.
    fn push(&mut self, left: &[f32], right: &[f32]) -> Result<(), SeparatorError>;

    /// The file ended: separates the rest.
    fn finish(&mut self) -> Result<(), SeparatorError>;

    /// The final frames not yet taken, in order from the file's first.
    fn output(&mut self) -> &mut FrameQueue;
}

impl<T: FileRun + ?Sized> FileRun for Box<T> {
    fn info(&self) -> &SeparatorInfo {
        (**self).info()
    }

    fn device(&self) -> Option<ActiveDevice> {
        (**self).device()
    }

    fn model_runs(&self) -> u64 {
        (**self).model_runs()
    }

    fn has_model_other(&self) -> bool {
        (**self).has_model_other()
    }

    fn start(&mut self) {
        (**self).start()
    }

    fn push(&mut self, left: &[f32], right: &[f32]) -> Result<(), SeparatorError> {
        (**self).push(left, right)
    }

    fn finish(&mut self) -> Result<(), SeparatorError> {
        (**self).finish()
    }

    fn output(&mut self) -> &mut FrameQueue {
        (**self).output()
    }
}
