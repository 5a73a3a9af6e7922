//! A model's stem sources: where each Stemflow stem comes from among the model's named outputs.
//! ("Route" means only a chain of separators: `hybrid/route_file.rs`.)

use crate::stem::{Stem, NUM_SEPARATED_STEMS};

/// How a Stemflow stem is made from the model's outputs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StemSource {
    /// The model has nothing for it.
    Silent,
    /// Model output `index` times `gain`.
    Output(usize, f32),
    /// The input minus model output `index` times `gain`.
    MixMinus(usize, f32),
}

/// The Stemflow stem a model stem name goes to directly.
pub fn stem_for_name(name: &str) -> Option<Stem> {
    match name {
        "vocals" | "vocal" | "voice" | "voices" | "singing" => Some(Stem::Vocals),
        "drums" | "drum" | "percussion" => Some(Stem::Drums),
        "bass" => Some(Stem::Bass),
        "guitar" | "guitars" => Some(Stem::Guitar),
        "piano" | "keys" => Some(Stem::Piano),
        _ => None,
    }
}

/// Whether a model stem name means "everything but the vocals".
pub fn is_accompaniment(name: &str) -> bool {
    matches!(
        name,
        "instrumental" | "inst" | "accompaniment" | "no_vocals" | "karaoke" | "music"
    )
}

/// The stem sources of a model that names its stems: named stems go to their Stemflow stem; without a
/// vocals output, an accompaniment output makes Vocals the mix minus it.
pub fn stem_sources_by_name(stems: &[String], gain: f32) -> [StemSource; NUM_SEPARATED_STEMS] {
    let mut sources = [StemSource::Silent; NUM_SEPARATED_STEMS];
    for (index, name) in stems.iter().enumerate() {
        if let Some(stem) = stem_for_name(name) {
            sources[stem.index()] = StemSource::Output(index, gain);
        }
    }
    if sources[Stem::Vocals.index()] == StemSource::Silent {
        if let Some(index) = stems.iter().position(|s| is_accompaniment(s)) {
            sources[Stem::Vocals.index()] = StemSource::MixMinus(index, gain);
        }
    }
    sources
}
