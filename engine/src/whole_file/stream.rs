//! [`WholeFileStream`]: one file through a [`WholeFileSeparator`], pushed block by block as it
//! is decoded and handed out as stems in the file's timeline, at its rate, with memory that does
//! not grow with its length. With the whole-file edges it resamples the file to the model's
//! rate and the stems back, and computes `Other`; with the stream's it is
//! [`OfflineStream`].

use crate::dsp::sanitize_into;
use crate::error::EngineError;
use crate::offline::{OfflineStream, SeparatedStems, StemFrames, OFFLINE_BLOCK_FRAMES};
use crate::stem::{Stem, NUM_SEPARATED_STEMS, NUM_STEMS};
use crate::stereo_input::StereoInput;

use super::file_run::{FileRun, FrameQueue, OTHER_PLANE};
use super::options::WholeFileOptions;
use super::resample::FileResampler;
use super::separator::{Loaded, WholeFileSeparator};

impl WholeFileSeparator {
    /// Starts separating a file at `sample_rate_hz`: push its frames, then finish.
    pub fn stream(&mut self, sample_rate_hz: u32) -> Result<WholeFileStream<'_>, EngineError> {
        WholeFileStream::new(self, sample_rate_hz)
    }

    /// The stems of a whole planar stereo file, `[stem][channel][frame]` in
    /// [`crate::Stem::ALL`] order, as long as the input and at its rate; `progress` gets the
    /// fraction done (0..=1) as the stems come.
    pub fn separate(
        &mut self,
        input: &[Vec<f32>; 2],
        sample_rate_hz: u32,
        progress: impl FnMut(f32),
    ) -> Result<SeparatedStems, EngineError> {
        let input = StereoInput::planar(input)?;
        let stream = self.stream(sample_rate_hz)?;
        let latency_samples = stream.latency_samples();
        SeparatedStems::collect(
            input.num_frames(),
            sample_rate_hz,
            latency_samples,
            progress,
            |sink| {
                let mut stream = stream;
                stream.push(input, &mut *sink)?;
                stream.finish(sink)
            },
        )
    }
}

/// What a file's separation counted ([`WholeFileStream::stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileStats {
    /// Input frames pushed so far.
    pub input_frames: u64,
    /// Input samples that were NaN or infinite, separated as silence.
    pub non_finite_input_samples: u64,
}

/// One file being separated. Dropping it before [`WholeFileStream::finish`] abandons the file;
/// the separator serves the next one.
pub struct WholeFileStream<'a> {
    owner: &'a mut WholeFileSeparator,
    state: State,
}

enum State {
    Stream(Option<Box<OfflineStream>>),
    WholeFile(Box<FileState>),
}

/// A whole-file run's per-file state at the file's rate.
struct FileState {
    sample_rate_hz: u32,
    model_rate_hz: u32,
    /// File rate → model rate and back (the planes in `stem_planes`), when they differ.
    to_model: Option<FileResampler>,
    from_model: Option<FileResampler>,
    /// The model's output planes resampled back: separated stems, then the model's `Other`.
    stem_planes: Vec<usize>,
    /// Sanitised input not yet handed out with its stems, for the residual.
    input: [Vec<f32>; 2],
    scratch: [Vec<f32>; 2],
    input_frames: u64,
    handed_out: u64,
    num_non_finite: u64,
    /// The stems handed to the sink.
    block: [[Vec<f32>; 2]; NUM_STEMS],
}

impl<'a> WholeFileStream<'a> {
    pub(super) fn new(
        owner: &'a mut WholeFileSeparator,
        sample_rate_hz: u32,
    ) -> Result<Self, EngineError> {
        crate::error::validate_sample_rate(sample_rate_hz as f32)?;
        let state = if let Loaded::WholeFile(run) = &mut owner.loaded {
            run.start();
            State::WholeFile(Box::new(FileState::new(run.as_ref(), sample_rate_hz)?))
        } else {
            let separator = owner.take_stream_separator()?;
            let mut stream = OfflineStream::new(separator, sample_rate_hz)?;
            stream.set_extra_stems(owner.options.extra_stems);
            State::Stream(Some(Box::new(stream)))
        };
        Ok(Self { owner, state })
    }

    /// The latency taken off: the stream's (what the plugin reports), 0 for whole files.
    pub fn latency_samples(&self) -> usize {
        match &self.state {
            State::Stream(stream) => stream.as_ref().map_or(0, |s| s.latency_samples()),
            State::WholeFile(_) => 0,
        }
    }

    /// What the file's separation has counted so far.
    pub fn stats(&self) -> FileStats {
        match &self.state {
            State::Stream(stream) => {
                stream
                    .as_ref()
                    .map_or_else(FileStats::default, |s| FileStats {
                        input_frames: s.input_frames(),
                        non_finite_input_samples: s.stats().non_finite_input_samples(),
                    })
            }
            State::WholeFile(file) => FileStats {
                input_frames: file.input_frames,
                non_finite_input_samples: file.num_non_finite,
            },
        }
    }

    /// Separates the next frames and hands `sink` every run of
    /// stems that became final, in order. An error of `sink` stops the call.
    pub fn push<E: From<EngineError>>(
        &mut self,
        input: StereoInput<'_>,
        mut sink: impl FnMut(StemFrames<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        match &mut self.state {
            State::Stream(stream) => {
                let stream = stream.as_mut().expect("the stream runs until finished");
                stream.push(input, sink)
            }
            State::WholeFile(file) => {
                let Loaded::WholeFile(run) = &mut self.owner.loaded else {
                    unreachable!("a whole-file state runs a whole-file separator")
                };
                for block in input.chunks(OFFLINE_BLOCK_FRAMES) {
                    file.push(run.as_mut(), block)?;
                    file.hand_out(run.as_mut(), &self.owner.options, &mut sink)?;
                }
                Ok(())
            }
        }
    }

    /// The file ended: separates the rest and hands it to `sink`, so that exactly as many
    /// frames of stems came out as went in.
    pub fn finish<E: From<EngineError>>(
        mut self,
        mut sink: impl FnMut(StemFrames<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        match &mut self.state {
            State::Stream(stream) => {
                let mut stream = stream.take().expect("the stream runs until finished");
                let result = stream.finish(&mut sink);
                self.put_back(*stream);
                result
            }
            State::WholeFile(file) => {
                let Loaded::WholeFile(run) = &mut self.owner.loaded else {
                    unreachable!("a whole-file state runs a whole-file separator")
                };
                file.finish(run.as_mut())?;
                file.hand_out(run.as_mut(), &self.owner.options, &mut sink)?;
                let expected = file.input_frames;
                if file.handed_out != expected {
                    return Err(E::from(EngineError::Worker(format!(
                        "{} frames of stems for {expected} frames of input",
                        file.handed_out
                    ))));
                }
                Ok(())
            }
        }
    }

    /// Hands the stream mode's separator back for the next file.
    fn put_back(&mut self, stream: OfflineStream) {
        if let Loaded::Stream(slot) = &mut self.owner.loaded {
            *slot = stream.into_separator();
        }
    }
}

impl Drop for WholeFileStream<'_> {
    fn drop(&mut self) {
        if let State::Stream(stream) = &mut self.state {
            if let Some(stream) = stream.take() {
                self.put_back(*stream);
            }
        }
    }
}

impl FileState {
    fn new(run: &dyn FileRun, sample_rate_hz: u32) -> Result<Self, EngineError> {
        let model_rate_hz = run.info().sample_rate_hz();
        let mut stem_planes: Vec<usize> = Stem::ALL[..NUM_SEPARATED_STEMS]
            .iter()
            .filter(|&&stem| run.info().delivers_stem(stem))
            .flat_map(|stem| [stem.index() * 2, stem.index() * 2 + 1])
            .collect();
        if run.has_model_other() {
            stem_planes.extend([OTHER_PLANE, OTHER_PLANE + 1]);
        }
        let (to_model, from_model) = if model_rate_hz == sample_rate_hz {
            (None, None)
        } else {
            (
                Some(FileResampler::new(sample_rate_hz, model_rate_hz, 2)?),
                Some(FileResampler::new(
                    model_rate_hz,
                    sample_rate_hz,
                    stem_planes.len().max(1),
                )?),
            )
        };
        Ok(Self {
            sample_rate_hz,
            model_rate_hz,
            to_model,
            from_model,
            stem_planes,
            input: [Vec::new(), Vec::new()],
            scratch: [Vec::new(), Vec::new()],
            input_frames: 0,
            handed_out: 0,
            num_non_finite: 0,
            block: Default::default(),
        })
    }

    /// Sanitises one block (NaN and infinities become silence, as in the stream) and runs it
    /// through the model at its rate.
    fn push(&mut self, run: &mut dyn FileRun, input: StereoInput<'_>) -> Result<(), EngineError> {
        for (channel, source) in input.channels().into_iter().enumerate() {
            let scratch = &mut self.scratch[channel];
            scratch.resize(source.len(), 0.0);
            self.num_non_finite += sanitize_into(source, scratch) as u64;
            self.input[channel].extend_from_slice(scratch);
        }
        self.input_frames += input.num_frames() as u64;
        match &mut self.to_model {
            Some(to_model) => {
                to_model.push(&[&self.scratch[0][..], &self.scratch[1][..]])?;
                run.push(to_model.channel(0), to_model.channel(1))
                    .map_err(EngineError::Separator)?;
                let frames = to_model.num_frames();
                to_model.consume(frames);
            }
            None => run
                .push(&self.scratch[0], &self.scratch[1])
                .map_err(EngineError::Separator)?,
        }
        self.resample_back(run.output())
    }

    /// The file ended: the rest at the model's rate, then the stems' last frames.
    fn finish(&mut self, run: &mut dyn FileRun) -> Result<(), EngineError> {
        if let Some(to_model) = &mut self.to_model {
            let model_frames = (self.input_frames * u64::from(self.model_rate_hz))
                .div_ceil(u64::from(self.sample_rate_hz));
            to_model.finish(model_frames as usize)?;
            run.push(to_model.channel(0), to_model.channel(1))
                .map_err(EngineError::Separator)?;
            let frames = to_model.num_frames();
            to_model.consume(frames);
        }
        run.finish().map_err(EngineError::Separator)?;
        self.resample_back(run.output())?;
        if let Some(from_model) = &mut self.from_model {
            from_model.finish(self.input_frames as usize)?;
        }
        Ok(())
    }

    /// Moves the model's stems, at the file's rate, to where [`FileState::hand_out`] reads them.
    fn resample_back(&mut self, output: &mut FrameQueue) -> Result<(), EngineError> {
        if let Some(from_model) = &mut self.from_model {
            let planes: Vec<&[f32]> = self.stem_planes.iter().map(|&p| output.plane(p)).collect();
            if !output.is_empty() && !planes.is_empty() {
                from_model.push(&planes)?;
            } else if !output.is_empty() {
                // Nothing separated: the resampler keeps count of the frames all the same.
                from_model.push(&[&vec![0.0; output.len()][..]])?;
            }
            output.clear();
        }
        Ok(())
    }

    /// Hands `sink` the stems ready at the file's rate, with `Other` (the residual of the
    /// input, or the model's own) and guitar and piano where `options` puts them.
    fn hand_out<E: From<EngineError>>(
        &mut self,
        run: &mut dyn FileRun,
        options: &WholeFileOptions,
        sink: &mut impl FnMut(StemFrames<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let ready = match &self.from_model {
            Some(from_model) => from_model.num_frames(),
            None => run.output().len(),
        };
        let frames = ready.min(self.input[0].len());
        if frames == 0 {
            return Ok(());
        }
        let has_model_other = run.has_model_other();
        for (stem, stem_block) in self.block.iter_mut().enumerate() {
            for (channel, samples) in stem_block.iter_mut().enumerate() {
                samples.clear();
                let plane = if stem == Stem::Other.index() {
                    OTHER_PLANE + channel
                } else {
                    stem * 2 + channel
                };
                let source: Option<&[f32]> = match &self.from_model {
                    Some(from_model) => self
                        .stem_planes
                        .iter()
                        .position(|&p| p == plane)
                        .map(|index| &from_model.channel(index)[..frames]),
                    None => Some(&run.output().plane(plane)[..frames]),
                };
                match source {
                    Some(values) => samples.extend_from_slice(values),
                    None => samples.resize(frames, 0.0),
                }
            }
        }
        if !has_model_other {
            residual_other(&mut self.block, &self.input, frames);
        }
        options.extra_stems.apply(&mut self.block, 0..frames);
        let first_frame = self.handed_out;
        self.handed_out += frames as u64;
        for channel in &mut self.input {
            channel.drain(..frames);
        }
        match &mut self.from_model {
            Some(from_model) => from_model.consume(frames),
            None => run.output().consume(frames),
        }
        sink(StemFrames::from_stems(&self.block, 0..frames, first_frame))
    }
}

/// `Other` as the stream computes it: the input minus every separated stem.
fn residual_other(block: &mut [[Vec<f32>; 2]; NUM_STEMS], input: &[Vec<f32>; 2], frames: usize) {
    let (separated, other) = block.split_at_mut(NUM_SEPARATED_STEMS);
    for channel in 0..2 {
        let other = &mut other[0][channel];
        for (frame, (o, &x)) in other.iter_mut().zip(&input[channel][..frames]).enumerate() {
            let mut sum = 0.0;
            for stem in separated.iter() {
                sum += stem[channel][frame];
            }
            *o = x - sum;
        }
    }
}
