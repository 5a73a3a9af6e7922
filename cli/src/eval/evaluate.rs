//! One track evaluated: separated by the model (or read from `--estimates`) and scored.

use std::path::Path;
use std::time::Instant;

use stemflow_engine::whole_file::WholeFileSeparator;
use stemflow_engine::{EngineError, Stem, StemFrames, StereoInput};
use stemflow_kit::bsseval::TrackScores;

use super::dataset::TrackFolder;
use super::targets::{estimate_targets, extra_stems_for, model_targets, Estimate, Target};
use super::track::{Pairing, Reader};
use crate::decode::AudioDecoder;
use crate::progress::{Progress, ProgressMode};

/// Why a track could not be evaluated (or the run was stopped).
pub enum TrackError {
    /// This track: report it and go on.
    Track(String),
    /// Every track would fail so (the model): stop.
    Fatal(String),
    /// A signal: stop.
    Interrupted(i32),
}

impl From<EngineError> for TrackError {
    fn from(error: EngineError) -> Self {
        TrackError::Track(error.to_string())
    }
}

impl From<String> for TrackError {
    fn from(message: String) -> Self {
        TrackError::Track(message)
    }
}

/// A track's scores and what it took.
pub struct TrackResult {
    /// The track.
    pub track: TrackFolder,
    /// The targets' names, in the order of `scores`.
    pub target_names: Vec<String>,
    /// The scores.
    pub scores: TrackScores,
    /// Seconds of audio.
    pub audio_s: f64,
    /// Seconds it took to separate and score it.
    pub elapsed_s: f64,
}

/// Where the estimates come from.
pub enum EstimateSource<'a> {
    /// The model, built on the first track and kept for the next.
    Model {
        /// The built model, between tracks.
        slot: &'a mut Option<WholeFileSeparator>,
        /// Builds it.
        load: &'a dyn Fn() -> Result<WholeFileSeparator, String>,
    },
    /// Files written before, `DIR/[SUBSET/]TRACK/NAME.wav`.
    Files(&'a Path),
}

/// Evaluates `track`, showing progress as `label`.
pub fn evaluate_track(
    track: &TrackFolder,
    source: EstimateSource<'_>,
    progress: ProgressMode,
    label: &str,
) -> Result<TrackResult, TrackError> {
    let started = Instant::now();
    let (target_names, scores, frames, rate) = match source {
        EstimateSource::Model { slot, load } => {
            let mut model = match slot.take() {
                Some(model) => model,
                None => load().map_err(TrackError::Fatal)?,
            };
            let scored = with_model(track, &mut model, progress, label);
            // The loaded model serves the next track (a stream whose worker died builds its
            // separator again).
            *slot = Some(model);
            scored?
        }
        EstimateSource::Files(dir) => with_files(track, dir)?,
    };
    Ok(TrackResult {
        track: track.clone(),
        target_names,
        scores,
        audio_s: frames as f64 / f64::from(rate.max(1)),
        elapsed_s: started.elapsed().as_secs_f64(),
    })
}

type Scored = (Vec<String>, TrackScores, u64, u32);

/// Separates `track`'s mixture with `model` and scores it.
fn with_model(
    track: &TrackFolder,
    model: &mut WholeFileSeparator,
    progress_mode: ProgressMode,
    label: &str,
) -> Result<Scored, TrackError> {
    let mut decoder = AudioDecoder::open(&track.mixture)
        .map_err(|e| TrackError::Track(format!("{}: {e}", track.mixture.display())))?;
    let rate = decoder.info().sample_rate_hz;
    stemflow_engine::validate_sample_rate(rate as f32)?;
    let extra_stems = extra_stems_for(track);
    let targets = model_targets(track, |stem| model.delivers_stem(stem), extra_stems);
    let mut pairing = Pairing::open(track, &targets, rate)?;
    model.set_extra_stems(extra_stems);
    let mut stream = model.stream(rate)?;
    let mut progress = Progress::start(progress_mode, label, decoder.info().num_frames, rate);
    let mut sink = |frames: StemFrames<'_>| -> Result<(), TrackError> {
        for (index, target) in targets.iter().enumerate() {
            let Estimate::Stems(stems) = &target.estimate else {
                continue;
            };
            let [left, right] = [0, 1].map(|channel| sum_stems(&frames, stems, channel));
            pairing.add(index, &left, &right);
        }
        pairing.score_ready()?;
        progress.update(frames.first_frame() + frames.num_frames() as u64);
        Ok(())
    };
    let mut frames = 0u64;
    let result = (|| {
        while let Some([left, right]) = decoder.next_block()? {
            frames += left.len() as u64;
            stream.push(StereoInput::new(left, right)?, &mut sink)?;
            if let Some(signal) = crate::interrupt::received() {
                return Err(TrackError::Interrupted(signal));
            }
        }
        stream.finish(&mut sink)
    })();
    if let Err(error) = result {
        progress.abandon();
        return Err(error);
    }
    progress.finish(frames);
    let scores = pairing.finish()?;
    Ok((names(&targets), scores, frames, rate))
}

/// The sum of `stems` of `frames`, one channel.
fn sum_stems(frames: &StemFrames<'_>, stems: &[Stem], channel: usize) -> Vec<f32> {
    let mut sum = frames.channel(stems[0], channel).to_vec();
    for &stem in &stems[1..] {
        for (s, &x) in sum.iter_mut().zip(frames.channel(stem, channel)) {
            *s += x;
        }
    }
    sum
}

/// Scores the estimates of `track` in `dir`.
fn with_files(track: &TrackFolder, dir: &Path) -> Result<Scored, TrackError> {
    let targets = estimate_targets(track, dir)?;
    let mut readers = Vec::new();
    for target in &targets {
        if let Estimate::File(path) = &target.estimate {
            readers.push(Reader::open(path)?);
        }
    }
    let rate = readers[0].sample_rate_hz();
    if let Some(reader) = readers.iter().find(|r| r.sample_rate_hz() != rate) {
        return Err(TrackError::Track(format!(
            "its estimates differ in rate ({} and {rate} Hz)",
            reader.sample_rate_hz()
        )));
    }
    let mut pairing = Pairing::open(track, &targets, rate)?;
    let mut is_any_left = true;
    while is_any_left {
        is_any_left = false;
        for (index, reader) in readers.iter_mut().enumerate() {
            if let Some([left, right]) = reader.next_block()? {
                pairing.add(index, &left, &right);
                is_any_left = true;
            }
        }
        pairing.score_ready()?;
    }
    let frames = pairing.scored_frames();
    let scores = pairing.finish()?;
    Ok((names(&targets), scores, frames, rate))
}

fn names(targets: &[Target]) -> Vec<String> {
    targets.iter().map(|t| t.name.clone()).collect()
}
