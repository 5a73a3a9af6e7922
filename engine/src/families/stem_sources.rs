//! A model's stem sources: where each Stemflow stem comes from among the model's named outputs.
//! ("Route" means only a chain of separators: `hybrid/route_file.rs`.)

use crate::stem::{Stem, NUM_SEPARATED_STEMS};

/// Every stem as the family's reference writes it: the separated stems, and `Other` from the
/// model's own output where it has one (`None`: the residual, as the reference's instrumental
/// of a model without one is the mix minus its stems).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReferenceSources {
    /// Vocals, drums, bass, guitar, piano.
    pub separated: [StemSource; NUM_SEPARATED_STEMS],
    /// The model's `Other`.
    pub other: Option<StemSource>,
}

impl ReferenceSources {
    /// The stems `separated`, and `Other` from the output named `other`, else from an
    /// accompaniment output (a two-stem model's instrumental), unscaled.
    pub fn by_name(stems: &[String], separated: [StemSource; NUM_SEPARATED_STEMS]) -> Self {
        let other = stems
            .iter()
            .position(|name| name == "other")
            .or_else(|| stems.iter().position(|name| is_accompaniment(name)))
            .map(|index| StemSource::Output(index, 1.0));
        Self { separated, other }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_models_own_other_is_its_other_or_its_accompaniment() {
        let demucs = names(&["drums", "bass", "other", "vocals"]);
        let sources = ReferenceSources::by_name(&demucs, stem_sources_by_name(&demucs, 1.0));
        assert_eq!(sources.other, Some(StemSource::Output(2, 1.0)));
        assert_eq!(
            sources.separated[Stem::Vocals.index()],
            StemSource::Output(3, 1.0)
        );
        let spleeter = names(&["vocals", "accompaniment"]);
        let sources = ReferenceSources::by_name(&spleeter, stem_sources_by_name(&spleeter, 1.0));
        assert_eq!(sources.other, Some(StemSource::Output(1, 1.0)));
        let vocals_only = names(&["vocals"]);
        let sources =
            ReferenceSources::by_name(&vocals_only, stem_sources_by_name(&vocals_only, 1.0));
        assert_eq!(sources.other, None);
    }
}
