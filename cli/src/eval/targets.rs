//! [`Target`]: what one score compares — an estimate (a model's stems summed, or a file) with
//! a track's references (summed) — and which targets a track has.

use std::path::{Path, PathBuf};

use stemflow_engine::{ExtraStems, Stem};

use super::dataset::TrackFolder;

/// What is compared with a target's references.
#[derive(Debug, Clone, PartialEq)]
pub enum Estimate {
    /// The sum of these stems of the model.
    Stems(Vec<Stem>),
    /// A file of estimates (`--estimates`).
    File(PathBuf),
}

/// One score of a track.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// `vocals`, …, or `accompaniment` (everything but the vocals).
    pub name: String,
    /// Indices into the track's references, whose sum is the reference.
    pub references: Vec<usize>,
    /// The estimate.
    pub estimate: Estimate,
}

/// The separated stems (not `Other`) a model delivers on a track: guitar and piano only when
/// the track has references for them (then `extra_stems` says they are separate).
pub fn extra_stems_for(track: &TrackFolder) -> ExtraStems {
    let has_extra = track
        .references
        .iter()
        .any(|(name, _)| Stem::EXTRA.iter().any(|s| s.file_name() == name));
    if has_extra {
        ExtraStems::Separate
    } else {
        ExtraStems::IntoOther
    }
}

/// A model's targets on `track`: each stem it `delivers` that the track has a reference for,
/// then the rest — the model's `Other` plus its stems the track has no reference for — against
/// the sum of the references no stem matched (MUSDB18 with a four-stem model: `other.wav`; with
/// a vocals model: drums, bass and other, named `accompaniment` as museval names it). Together
/// they partition the mixture, as the references do.
pub fn model_targets(
    track: &TrackFolder,
    delivers: impl Fn(Stem) -> bool,
    extra_stems: ExtraStems,
) -> Vec<Target> {
    let reference_index = |name: &str| track.references.iter().position(|(n, _)| n == name);
    let separated: Vec<Stem> = Stem::OUTPUT_ORDER
        .into_iter()
        .filter(|&stem| stem != Stem::Other && delivers(stem))
        .filter(|stem| !stem.is_extra() || extra_stems == ExtraStems::Separate)
        .collect();
    let mut targets = Vec::new();
    let mut rest_estimate = vec![Stem::Other];
    for stem in separated {
        match reference_index(stem.file_name()) {
            Some(index) => targets.push(Target {
                name: stem.file_name().to_owned(),
                references: vec![index],
                estimate: Estimate::Stems(vec![stem]),
            }),
            None => rest_estimate.push(stem),
        }
    }
    let matched: Vec<usize> = targets.iter().flat_map(|t| t.references.clone()).collect();
    let is_stem_name = |name: &str| Stem::ALL.iter().any(|s| s.file_name() == name);
    let mut rest: Vec<usize> = (0..track.references.len())
        .filter(|i| !matched.contains(i) && is_stem_name(&track.references[*i].0))
        .collect();
    if rest.is_empty() {
        // A two-stem dataset: its one other file (instrumental, accompaniment, …).
        let others: Vec<usize> = (0..track.references.len())
            .filter(|i| !matched.contains(i))
            .collect();
        if others.len() == 1 {
            rest = others;
        }
    }
    if !rest.is_empty() {
        let name = match rest.as_slice() {
            [one] => track.references[*one].0.clone(),
            _ if targets.len() == 1 && targets[0].name == "vocals" => "accompaniment".into(),
            _ => "other".into(),
        };
        targets.push(Target {
            name,
            references: rest,
            estimate: Estimate::Stems(rest_estimate),
        });
    }
    targets
}

/// The targets of estimates written before (`--estimates DIR`), as museval's `eval_mus_dir`
/// reads them: `DIR/SUBSET/TRACK/NAME.wav` (or `DIR/TRACK/…`), each against the track's
/// reference of the same name; `accompaniment` against every reference but the vocals.
pub fn estimate_targets(track: &TrackFolder, estimates_dir: &Path) -> Result<Vec<Target>, String> {
    let mut folder = estimates_dir.join(&track.name);
    if let Some(subset) = &track.subset {
        let in_subset = estimates_dir.join(subset).join(&track.name);
        if in_subset.is_dir() {
            folder = in_subset;
        }
    }
    if !folder.is_dir() {
        return Err(format!("no estimates for it in {}", folder.display()));
    }
    let mut targets = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(&folder)
        .map_err(|e| format!("{}: {e}", folder.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("wav") || e.eq_ignore_ascii_case("flac"))
        })
        .collect();
    entries.sort();
    for path in entries {
        let name = path
            .file_stem()
            .map(|n| n.to_string_lossy().to_lowercase())
            .unwrap_or_default();
        let references: Vec<usize> = match track.references.iter().position(|(n, _)| *n == name) {
            Some(index) => vec![index],
            None if name == "accompaniment" => (0..track.references.len())
                .filter(|&i| track.references[i].0 != "vocals")
                .collect(),
            None => continue,
        };
        targets.push(Target {
            name,
            references,
            estimate: Estimate::File(path),
        });
    }
    if targets.is_empty() {
        return Err(format!(
            "no estimate in {} is named after one of its references",
            folder.display()
        ));
    }
    Ok(targets)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn track(references: &[&str]) -> TrackFolder {
        TrackFolder {
            name: "t".into(),
            subset: None,
            mixture: "mixture.wav".into(),
            references: references
                .iter()
                .map(|n| (n.to_string(), PathBuf::from(format!("{n}.wav"))))
                .collect(),
        }
    }

    fn summary(targets: &[Target]) -> Vec<(String, Vec<usize>, Vec<Stem>)> {
        targets
            .iter()
            .map(|t| {
                let Estimate::Stems(stems) = &t.estimate else {
                    panic!("a file")
                };
                (t.name.clone(), t.references.clone(), stems.clone())
            })
            .collect()
    }

    #[test]
    fn four_stems_on_musdb_and_a_vocals_model_against_the_accompaniment() {
        let musdb = track(&["bass", "drums", "other", "vocals"]);
        let four = [Stem::Vocals, Stem::Drums, Stem::Bass];
        let targets = model_targets(&musdb, |s| four.contains(&s), ExtraStems::IntoOther);
        assert_eq!(
            summary(&targets),
            [
                ("vocals".into(), vec![3], vec![Stem::Vocals]),
                ("drums".into(), vec![1], vec![Stem::Drums]),
                ("bass".into(), vec![0], vec![Stem::Bass]),
                ("other".into(), vec![2], vec![Stem::Other]),
            ]
        );
        let targets = model_targets(&musdb, |s| s == Stem::Vocals, ExtraStems::IntoOther);
        assert_eq!(
            summary(&targets),
            [
                ("vocals".into(), vec![3], vec![Stem::Vocals]),
                ("accompaniment".into(), vec![0, 1, 2], vec![Stem::Other]),
            ]
        );
        // A two-stem dataset and a four-stem model: drums and bass go to the instrumental.
        let two = track(&["instrumental", "vocals"]);
        let targets = model_targets(&two, |s| four.contains(&s), ExtraStems::IntoOther);
        assert_eq!(
            summary(&targets),
            [
                ("vocals".into(), vec![1], vec![Stem::Vocals]),
                (
                    "instrumental".into(),
                    vec![0],
                    vec![Stem::Other, Stem::Drums, Stem::Bass]
                ),
            ]
        );
    }
}
