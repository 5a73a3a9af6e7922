//! Ensembles: several separators run on the same input and their stems combined stem by stem,
//! as producers combine models with UVR's ensemble mode or MSST's `ensemble.py`.
//!
//! - [`EnsembleMethod`] (`method.rs`): the algorithm — MSST's `avg_wave`, `median_wave`,
//!   `min_wave`, `max_wave`, `avg_fft`, `median_fft`, `min_fft`, `max_fft` (weights for the
//!   averages), UVR's *Max Spec*, *Min Spec* and *Average* — exactly as their code computes it:
//!   librosa's STFT (2048 points, hop 1024, periodic Hann, `center=True`, silence padded at the
//!   edges), magnitudes compared in single precision, ties to the first member (numpy's
//!   `argmax`, MSST) or the last (UVR's `>=`), numpy's median of complex numbers.
//! - [`ChannelCombiner`]: one channel of one stem combined as it streams; a whole file pushed
//!   through it and finished equals MSST's `average_waveforms` ([`combine_whole_file`]).
//! - [`EnsembleSeparator`]: a [`crate::separator::Separator`] of several members, what the
//!   plugin runs (an ensemble stage of a route, [`crate::hybrid`]). Its latency is the slowest
//!   member's (the others are delayed to line up) plus, for the spectral algorithms, the
//!   2048 samples a sample waits for both of its STFT frames. A stream cannot know where the
//!   file ends: its spectral combination equals the whole file's except over the last 2048
//!   samples (46 ms at 44.1 kHz), whose last frames see the members' stems of what follows.
//! - `StemCombination` (`stem_combination.rs`): which members make each stem and how, written
//!   once for the plugin's separator and for whole files, where every member runs as a whole
//!   file of its own and their stems are combined to the file's last sample, as MSST combines
//!   the members' files ([`crate::whole_file`], what `stemflow separate --model a+b --ensemble`
//!   writes).
//! - [`EnsembleSpec`]: which separators and how, as a route file or `--model a+b --ensemble`
//!   says it.

mod channel_combiner;
pub(crate) mod method;
mod reduce;
mod separator;
pub(crate) mod spec;
mod stem_combination;

pub use channel_combiner::{delay_samples_of, ChannelCombiner, SPECTRAL_DELAY_SAMPLES};
pub use method::{EnsembleAlgorithm, EnsembleMethod};
pub use separator::EnsembleSeparator;
pub use spec::EnsembleSpec;
pub(crate) use stem_combination::StemCombination;

/// MSST's `average_waveforms` (or UVR's ensemble) of one channel of a whole file: the members'
/// samples (all as long) combined by `method` (one weight per member), as long as they are.
/// Not realtime-safe: allocates.
///
/// # Panics
/// If the members differ in length or their number is not the number of weights.
pub fn combine_whole_file(method: &EnsembleMethod, members: &[&[f32]]) -> Vec<f32> {
    assert_eq!(
        members.len(),
        method.weights().len(),
        "one weight per member"
    );
    let len = members.first().map_or(0, |m| m.len());
    assert!(
        members.iter().all(|m| m.len() == len),
        "members differ in length"
    );
    let mut combiner = ChannelCombiner::new(method.algorithm(), method.weights());
    let mut out = vec![0.0; len];
    combiner.process(|m| members[m], &mut out);
    combiner.finish(&mut out);
    out.split_off(combiner.delay_samples().min(len))
}
