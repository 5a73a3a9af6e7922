//! [`WholeFileStream`]: one file through a [`WholeFileSeparator`], pushed block by block as it
//! is decoded and handed out as stems in the file's timeline, at its rate, with memory that does
//! not grow with its length. With the whole-file edges it resamples the file to the model's
//! rate and the stems back, and computes `Other`; with the stream's it is
//! [`OfflineStream`].

use crate::dsp::sanitize_into;
use crate::error::EngineError;
use crate::offline::{OfflineStream, SeparatedStems, StemFrames, OFFLINE_BLOCK_FRAMES};
use crate::stem::{ExtraStems, Stem, NUM_SEPARATED_STEMS, NUM_STEMS};
use crate::stereo_input::StereoInput;

use super::ensemble_run::EnsembleRun;
use super::file_run::{FileRun, FrameQueue, MIX_PLANE, OTHER_PLANE};
use super::options::WholeFileOptions;
use super::resample::FileResampler;
use super::separator::{Loaded, WholeFileSeparator};
use crate::hybrid::file_info_at;
use crate::runtime::devices::ActiveDevice;
use crate::separator::{stem_channel, SeparatorError, SeparatorInfo};

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

/// A file's separation by one [`WholeFileSeparator`], which every call is given (a member of
/// an ensemble owns both).
pub(super) enum State {
    /// The stream, as the plugin renders (`None` once finished and handed back).
    Stream(Option<Box<OfflineStream>>),
    /// The reference's edges at the model's rate.
    WholeFile(Box<FileState>),
    /// An ensemble: each member separating the file as it would alone, their stems combined at
    /// the file's rate (`None` once the members are handed back).
    Ensemble(Option<Box<EnsembleFile>>),
}

/// An ensemble's file: the members' runs combined, at the file's rate.
pub(super) struct EnsembleFile {
    run: EnsembleRun<MemberRun>,
    file: FileState,
}

impl<'a> WholeFileStream<'a> {
    pub(super) fn new(
        owner: &'a mut WholeFileSeparator,
        sample_rate_hz: u32,
    ) -> Result<Self, EngineError> {
        let state = State::new(owner, sample_rate_hz)?;
        Ok(Self { owner, state })
    }

    /// The latency taken off: the stream's (what the plugin reports), 0 for whole files.
    pub fn latency_samples(&self) -> usize {
        self.state.latency_samples()
    }

    /// What the file's separation has counted so far.
    pub fn stats(&self) -> FileStats {
        self.state.stats()
    }

    /// Separates the next frames and hands `sink` every run of
    /// stems that became final, in order. An error of `sink` stops the call.
    pub fn push<E: From<EngineError>>(
        &mut self,
        input: StereoInput<'_>,
        sink: impl FnMut(StemFrames<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        self.state.advance(self.owner, Some(input), sink)
    }

    /// The file ended: separates the rest and hands it to `sink`, so that exactly as many
    /// frames of stems came out as went in.
    pub fn finish<E: From<EngineError>>(
        mut self,
        sink: impl FnMut(StemFrames<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        self.state.advance(self.owner, None, sink)
    }
}

impl Drop for WholeFileStream<'_> {
    fn drop(&mut self) {
        self.state.put_back(self.owner);
    }
}

impl State {
    /// Starts a file at `sample_rate_hz` with `owner`'s separator.
    pub(super) fn new(
        owner: &mut WholeFileSeparator,
        sample_rate_hz: u32,
    ) -> Result<Self, EngineError> {
        crate::error::validate_sample_rate(sample_rate_hz as f32)?;
        let extra_stems = owner.options.extra_stems;
        match &mut owner.loaded {
            Loaded::WholeFile(run) => {
                run.start();
                Ok(State::WholeFile(Box::new(FileState::new(
                    run.as_ref(),
                    sample_rate_hz,
                )?)))
            }
            Loaded::Ensemble(ensemble) => {
                let mut members = std::mem::take(&mut ensemble.members).into_iter();
                let mut runs = Vec::new();
                let failure = loop {
                    let Some(mut member) = members.next() else {
                        break None;
                    };
                    member.set_extra_stems(extra_stems);
                    match State::new(&mut member, sample_rate_hz) {
                        Ok(state) => runs.push(MemberRun::new(member, state, sample_rate_hz)),
                        Err(error) => break Some((member, error)),
                    }
                };
                if let Some((member, error)) = failure {
                    // The members go back for the next file, in their order.
                    ensemble.members = runs
                        .into_iter()
                        .map(MemberRun::into_separator)
                        .chain(std::iter::once(member))
                        .chain(members)
                        .collect();
                    return Err(error);
                }
                let run = EnsembleRun::new(ensemble.label.clone(), &ensemble.method, runs)
                    .map_err(EngineError::Worker)?;
                match FileState::new(&run, sample_rate_hz) {
                    Ok(file) => Ok(State::Ensemble(Some(Box::new(EnsembleFile { run, file })))),
                    Err(error) => {
                        ensemble.members = run
                            .into_members()
                            .into_iter()
                            .map(MemberRun::into_separator)
                            .collect();
                        Err(error)
                    }
                }
            }
            Loaded::Stream(_) => {
                let separator = owner.take_stream_separator()?;
                let mut stream = OfflineStream::new(separator, sample_rate_hz)?;
                stream.set_extra_stems(extra_stems);
                Ok(State::Stream(Some(Box::new(stream))))
            }
        }
    }

    fn latency_samples(&self) -> usize {
        match self {
            State::Stream(stream) => stream.as_ref().map_or(0, |s| s.latency_samples()),
            State::WholeFile(_) | State::Ensemble(_) => 0,
        }
    }

    fn stats(&self) -> FileStats {
        let of_file = |file: &FileState| FileStats {
            input_frames: file.input_frames,
            non_finite_input_samples: file.num_non_finite,
        };
        match self {
            State::Stream(stream) => {
                stream
                    .as_ref()
                    .map_or_else(FileStats::default, |s| FileStats {
                        input_frames: s.input_frames(),
                        non_finite_input_samples: s.stats().non_finite_input_samples(),
                    })
            }
            State::WholeFile(file) => of_file(file),
            State::Ensemble(ensemble) => ensemble
                .as_ref()
                .map_or_else(FileStats::default, |e| of_file(&e.file)),
        }
    }

    /// Separates the next frames of `input` (`None`: the file ended, the rest) with `owner`'s
    /// separator and hands `sink` the stems that became final.
    fn advance<E: From<EngineError>>(
        &mut self,
        owner: &mut WholeFileSeparator,
        input: Option<StereoInput<'_>>,
        mut sink: impl FnMut(StemFrames<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let options = owner.options;
        let (file, run): (&mut FileState, &mut dyn FileRun) = match self {
            State::Stream(stream) => {
                let stream = stream.as_mut().expect("the stream runs until finished");
                return match input {
                    Some(input) => stream.push(input, sink),
                    None => stream.finish(sink),
                };
            }
            State::WholeFile(file) => {
                let Loaded::WholeFile(run) = &mut owner.loaded else {
                    unreachable!("a whole-file state runs a whole-file separator")
                };
                (file, run.as_mut())
            }
            State::Ensemble(ensemble) => {
                let ensemble = ensemble.as_mut().expect("the members run until finished");
                (&mut ensemble.file, &mut ensemble.run)
            }
        };
        match input {
            Some(input) => file.push_blocks(run, input, &options, &mut sink),
            None => file.finish_all(run, &options, &mut sink),
        }
    }

    /// Hands what the file borrowed back to `owner` for the next file: the stream mode's
    /// separator, an ensemble's members.
    fn put_back(&mut self, owner: &mut WholeFileSeparator) {
        match (self, &mut owner.loaded) {
            (State::Stream(stream), Loaded::Stream(slot)) => {
                if let Some(stream) = stream.take() {
                    *slot = stream.into_separator();
                }
            }
            (State::Ensemble(ensemble), Loaded::Ensemble(loaded)) => {
                if let Some(ensemble) = ensemble.take() {
                    loaded.members = ensemble
                        .run
                        .into_members()
                        .into_iter()
                        .map(MemberRun::into_separator)
                        .collect();
                }
            }
            _ => {}
        }
    }
}

/// What a member's stems go to.
type MemberSink<'a> = dyn FnMut(StemFrames<'_>) -> Result<(), EngineError> + 'a;

/// A member of an ensemble over one file: its own [`WholeFileSeparator`] separating the file at
/// the file's rate exactly as it would alone, as a [`FileRun`] for the combination.
pub(super) struct MemberRun {
    separator: WholeFileSeparator,
    state: State,
    info: SeparatorInfo,
    /// The input whose stems have not come out yet, for the mix planes.
    pending_input: [Vec<f32>; 2],
    output: FrameQueue,
}

impl MemberRun {
    fn new(separator: WholeFileSeparator, state: State, sample_rate_hz: u32) -> Self {
        let info = file_info_at(
            sample_rate_hz,
            separator.name().to_owned(),
            std::iter::once(separator.info()),
            Stem::ALL[..NUM_SEPARATED_STEMS]
                .iter()
                .copied()
                .filter(|&stem| separator.delivers_stem(stem)),
        );
        Self {
            separator,
            state,
            info,
            pending_input: [Vec::new(), Vec::new()],
            output: FrameQueue::new(),
        }
    }

    /// The member, its file's borrowings handed back, for the next file.
    fn into_separator(mut self) -> WholeFileSeparator {
        self.state.put_back(&mut self.separator);
        self.separator
    }

    /// Queues a run of the member's stems with the input they came from.
    fn queue(output: &mut FrameQueue, pending_input: &mut [Vec<f32>; 2], frames: &StemFrames<'_>) {
        let count = frames.num_frames();
        for stem in &Stem::ALL[..NUM_SEPARATED_STEMS] {
            for channel in 0..2 {
                output
                    .plane_mut(stem_channel(stem.index(), channel))
                    .extend_from_slice(frames.channel(*stem, channel));
            }
        }
        for (channel, input) in pending_input.iter_mut().enumerate() {
            let taken = count.min(input.len());
            let mix = output.plane_mut(MIX_PLANE + channel);
            mix.extend(input.drain(..taken));
            mix.resize(mix.len() + count - taken, 0.0);
            let other = output.plane_mut(OTHER_PLANE + channel);
            other.resize(other.len() + count, 0.0);
        }
    }

    /// Runs `step` of the member's file with a sink that queues the stems it hands out.
    fn run_step(
        &mut self,
        step: impl FnOnce(
            &mut State,
            &mut WholeFileSeparator,
            &mut MemberSink<'_>,
        ) -> Result<(), EngineError>,
    ) -> Result<(), SeparatorError> {
        let Self {
            separator,
            state,
            pending_input,
            output,
            ..
        } = self;
        let mut sink = |frames: StemFrames<'_>| {
            Self::queue(output, pending_input, &frames);
            Ok(())
        };
        step(state, separator, &mut sink).map_err(|error| self.member_error(error))
    }

    fn member_error(&self, error: EngineError) -> SeparatorError {
        match error {
            EngineError::Separator(error) => error,
            other => SeparatorError {
                separator: self.info.name().to_owned(),
                reason: other.to_string(),
            },
        }
    }
}

impl FileRun for MemberRun {
    fn info(&self) -> &SeparatorInfo {
        &self.info
    }

    fn device(&self) -> Option<ActiveDevice> {
        self.separator.device()
    }

    fn model_runs(&self) -> u64 {
        self.separator.model_runs()
    }

    /// A member runs the one file it was made for.
    fn start(&mut self) {}

    fn has_model_other(&self) -> bool {
        false
    }

    fn push(&mut self, left: &[f32], right: &[f32]) -> Result<(), SeparatorError> {
        for (input, samples) in self.pending_input.iter_mut().zip([left, right]) {
            input.extend_from_slice(samples);
        }
        self.run_step(|state, separator, sink| {
            state.advance(separator, Some(StereoInput::new(left, right)?), sink)
        })
    }

    fn finish(&mut self) -> Result<(), SeparatorError> {
        self.run_step(|state, separator, sink| state.advance(separator, None, sink))
    }

    fn output(&mut self) -> &mut FrameQueue {
        &mut self.output
    }
}

/// A whole-file run's per-file state at the file's rate.
pub(super) struct FileState {
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

impl FileState {
    /// Separates `input` block by block with `run` and hands `sink` the stems that became
    /// final.
    fn push_blocks<E: From<EngineError>>(
        &mut self,
        run: &mut dyn FileRun,
        input: StereoInput<'_>,
        options: &WholeFileOptions,
        sink: &mut impl FnMut(StemFrames<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        for block in input.chunks(OFFLINE_BLOCK_FRAMES) {
            self.push(run, block)?;
            self.hand_out(run, options.extra_stems, sink)?;
        }
        Ok(())
    }

    /// The file ended: separates the rest with `run`, hands it to `sink`, and checks that as
    /// many frames of stems came out as went in.
    fn finish_all<E: From<EngineError>>(
        &mut self,
        run: &mut dyn FileRun,
        options: &WholeFileOptions,
        sink: &mut impl FnMut(StemFrames<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        self.finish(run)?;
        self.hand_out(run, options.extra_stems, sink)?;
        let expected = self.input_frames;
        if self.handed_out != expected {
            return Err(E::from(EngineError::Worker(format!(
                "{} frames of stems for {expected} frames of input",
                self.handed_out
            ))));
        }
        Ok(())
    }

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
    /// input, or the model's own) and guitar and piano where `extra_stems` puts them.
    fn hand_out<E: From<EngineError>>(
        &mut self,
        run: &mut dyn FileRun,
        extra_stems: ExtraStems,
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
        extra_stems.apply(&mut self.block, 0..frames);
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

#[cfg(test)]
mod tests {
    use crate::choice::SeparatorChoice;
    use crate::ensemble::{EnsembleAlgorithm, EnsembleMethod, EnsembleSpec};
    use crate::model_spec::ModelSpec;
    use crate::stem::Stem;
    use crate::whole_file::{WholeFileOptions, WholeFileSeparator};
    use stemflow_kit::demo_song::DemoSong;

    #[test]
    fn a_file_that_cannot_start_leaves_the_ensemble_whole_for_the_next() {
        let spec = ModelSpec::Ensemble(EnsembleSpec::new(
            vec![
                SeparatorChoice::Builtin,
                SeparatorChoice::Builtin,
                SeparatorChoice::Builtin,
            ],
            EnsembleMethod::new(EnsembleAlgorithm::AvgWave, 3, None).unwrap(),
        ));
        let mut ensemble = WholeFileSeparator::load(&spec, &WholeFileOptions::default()).unwrap();
        assert!(ensemble.stream(0).is_err());
        let input = DemoSong::generate(44_100, 0.2).mix();
        let stems = ensemble.separate(&input, 44_100, |_| {}).unwrap();
        assert_eq!(stems.stem(Stem::Vocals)[0].len(), input[0].len());
    }

    #[test]
    fn an_ensembles_members_separate_the_file_as_they_would_alone() {
        let options = WholeFileOptions::default();
        let builtin = ModelSpec::One(SeparatorChoice::Builtin);
        for rate in [22_050, 44_100, 48_000] {
            let input = DemoSong::generate(rate, 0.8).mix();
            let alone = WholeFileSeparator::load(&builtin, &options)
                .unwrap()
                .separate(&input, rate, |_| {})
                .unwrap();
            for (algorithm, limit) in [
                (EnsembleAlgorithm::AvgWave, 1e-6),
                (EnsembleAlgorithm::MaxSpec, 1e-5),
            ] {
                let spec = ModelSpec::Ensemble(EnsembleSpec::new(
                    vec![SeparatorChoice::Builtin, SeparatorChoice::Builtin],
                    EnsembleMethod::new(algorithm, 2, None).unwrap(),
                ));
                let mut ensemble = WholeFileSeparator::load(&spec, &options).unwrap();
                assert!(ensemble.is_whole_file());
                // Twice: the members come back for the next file.
                for _ in 0..2 {
                    let stems = ensemble.separate(&input, rate, |_| {}).unwrap();
                    for stem in Stem::ALL {
                        for channel in 0..2 {
                            let ours = &stems.stem(stem)[channel];
                            assert_eq!(ours.len(), input[0].len());
                            let largest = ours
                                .iter()
                                .zip(&alone.stem(stem)[channel])
                                .map(|(a, b)| (a - b).abs())
                                .fold(0.0f32, f32::max);
                            assert!(largest < limit, "{algorithm} {rate} Hz {stem:?}: {largest}");
                        }
                    }
                }
            }
        }
    }
}
