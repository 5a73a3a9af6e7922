//! How a model's named outputs become Stemflow's stems.

use crate::stem::{Stem, NUM_SEPARATED_STEMS};

/// How a Stemflow stem is made from the model's outputs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StemRoute {
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

/// Routes for models that name their stems: named stems go to their Stemflow stem; without a
/// vocals output, an accompaniment output makes Vocals the mix minus it.
pub fn routes_by_name(stems: &[String], gain: f32) -> [StemRoute; NUM_SEPARATED_STEMS] {
    let mut routes = [StemRoute::Silent; NUM_SEPARATED_STEMS];
    for (index, name) in stems.iter().enumerate() {
        if let Some(stem) = stem_for_name(name) {
            routes[stem.index()] = StemRoute::Output(index, gain);
        }
    }
    if routes[Stem::Vocals.index()] == StemRoute::Silent {
        if let Some(index) = stems.iter().position(|s| is_accompaniment(s)) {
            routes[Stem::Vocals.index()] = StemRoute::MixMinus(index, gain);
        }
    }
    routes
}
