//! One track scored: its estimates (a model's stems as they are separated, or files) paired
//! frame by frame with its references as they are decoded, so memory does not grow with the
//! track. As museval does, estimates are cut or padded with silence to the references' length.

use std::collections::VecDeque;
use std::path::Path;

use stemflow_kit::bsseval::{TrackScorer, TrackScores};

use super::dataset::TrackFolder;
use super::targets::Target;
use crate::decode::AudioDecoder;

/// Frames of silence scored at a time after estimates that end before their references.
const PAD_BLOCK_FRAMES: usize = 16_384;

/// An audio file decoded on demand.
pub struct Reader {
    decoder: AudioDecoder,
    queue: [VecDeque<f32>; 2],
    is_ended: bool,
}

impl Reader {
    /// Opens `path`.
    pub fn open(path: &Path) -> Result<Self, String> {
        let decoder = AudioDecoder::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Self {
            decoder,
            queue: Default::default(),
            is_ended: false,
        })
    }

    /// The file's rate.
    pub fn sample_rate_hz(&self) -> u32 {
        self.decoder.info().sample_rate_hz
    }

    /// Decodes until `frames` frames wait or the file ends.
    fn fill(&mut self, frames: usize) -> Result<(), String> {
        while !self.is_ended && self.queue[0].len() < frames {
            match self.decoder.next_block()? {
                Some([left, right]) => {
                    self.queue[0].extend(left);
                    self.queue[1].extend(right);
                }
                None => self.is_ended = true,
            }
        }
        Ok(())
    }

    /// The next block of the file, of any size; `None` at its end.
    pub fn next_block(&mut self) -> Result<Option<[Vec<f32>; 2]>, String> {
        self.fill(1)?;
        if self.queue[0].is_empty() {
            return Ok(None);
        }
        Ok(Some(self.queue.each_mut().map(|q| q.drain(..).collect())))
    }
}

/// A track's references paired with its estimates, target by target.
pub struct Pairing {
    readers: Vec<Reader>,
    targets: Vec<(Vec<usize>, [VecDeque<f32>; 2])>,
    scorer: TrackScorer,
    /// Frames scored so far, and whether the references ended.
    scored_frames: u64,
    is_reference_ended: bool,
}

impl Pairing {
    /// Opens `track`'s references that `targets` use, all at `sample_rate_hz`.
    pub fn open(
        track: &TrackFolder,
        targets: &[Target],
        sample_rate_hz: u32,
    ) -> Result<Self, String> {
        let mut readers = Vec::new();
        for (name, path) in &track.references {
            let reader = Reader::open(path)?;
            if reader.sample_rate_hz() != sample_rate_hz {
                return Err(format!(
                    "{name} is at {} Hz and the mixture at {sample_rate_hz} Hz",
                    reader.sample_rate_hz()
                ));
            }
            readers.push(reader);
        }
        Ok(Self {
            readers,
            targets: targets
                .iter()
                .map(|t| (t.references.clone(), Default::default()))
                .collect(),
            scorer: TrackScorer::new(targets.len(), sample_rate_hz),
            scored_frames: 0,
            is_reference_ended: false,
        })
    }

    /// The next frames of target `index`'s estimate.
    pub fn add(&mut self, index: usize, left: &[f32], right: &[f32]) {
        let queue = &mut self.targets[index].1;
        queue[0].extend(left);
        queue[1].extend(right);
    }

    /// Frames scored so far.
    pub fn scored_frames(&self) -> u64 {
        self.scored_frames
    }

    /// Scores the frames every target's estimate has reached, reading the references as far.
    pub fn score_ready(&mut self) -> Result<(), String> {
        let ready = self.targets.iter().map(|t| t.1[0].len()).min().unwrap_or(0);
        self.score(ready, false)
    }

    /// Scores `frames` frames of the estimates (silence past their end when `pad`), as far as
    /// the references go: estimates past them are dropped.
    fn score(&mut self, frames: usize, pad: bool) -> Result<(), String> {
        if frames == 0 || self.is_reference_ended {
            for (_, queue) in &mut self.targets {
                for q in queue.iter_mut() {
                    q.drain(..frames.min(q.len()));
                }
            }
            return Ok(());
        }
        for reader in &mut self.readers {
            reader.fill(frames)?;
        }
        let available: Vec<usize> = self.readers.iter().map(|r| r.queue[0].len()).collect();
        let frames_here = available.iter().copied().min().unwrap_or(0).min(frames);
        if available.iter().any(|&a| a < frames) {
            if available.iter().any(|&a| a != available[0]) {
                return Err("its references differ in length".into());
            }
            self.is_reference_ended = true;
        }
        let references: Vec<[Vec<f32>; 2]> = self
            .readers
            .iter_mut()
            .map(|r| r.queue.each_mut().map(|q| q.drain(..frames_here).collect()))
            .collect();
        let mut target_references = Vec::new();
        let mut estimates = Vec::new();
        for (indices, queue) in &mut self.targets {
            let sum: [Vec<f32>; 2] = std::array::from_fn(|channel| {
                (0..frames_here)
                    .map(|t| indices.iter().map(|&i| references[i][channel][t]).sum())
                    .collect()
            });
            target_references.push(sum);
            let estimate: [Vec<f32>; 2] = queue.each_mut().map(|q| {
                let take = frames.min(q.len());
                let mut samples: Vec<f32> = q.drain(..take).collect();
                if pad {
                    samples.resize(frames, 0.0);
                }
                samples.truncate(frames_here);
                samples
            });
            estimates.push(estimate);
        }
        fn as_slices(signals: &[[Vec<f32>; 2]]) -> Vec<[&[f32]; 2]> {
            signals
                .iter()
                .map(|[l, r]| [l.as_slice(), r.as_slice()])
                .collect()
        }
        self.scorer
            .push(&as_slices(&target_references), &as_slices(&estimates));
        self.scored_frames += frames_here as u64;
        Ok(())
    }

    /// Scores what is left: the estimates' last frames, then silence for as long as the
    /// references go on.
    pub fn finish(mut self) -> Result<TrackScores, String> {
        self.score_ready()?;
        while !self.is_reference_ended {
            self.score(PAD_BLOCK_FRAMES, true)?;
        }
        Ok(self.scorer.finish())
    }
}
