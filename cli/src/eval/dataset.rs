//! The tracks of an evaluation folder: MUSDB18-HQ's layout (`train/` and `test/`, a folder per
//! track with `mixture.wav` and one file per stem), one such subset, any folder of track folders
//! (each with a `mixture` file and its stems, in any format `stemflow` reads), or one track
//! folder.

use std::path::{Path, PathBuf};

use clap::ValueEnum;

/// File extensions of audio `stemflow` reads.
const AUDIO_EXTENSIONS: [&str; 8] = ["wav", "flac", "aif", "aiff", "mp3", "ogg", "m4a", "mp4"];
/// The names a track's mixture file may have (without the extension).
const MIXTURE_NAMES: [&str; 2] = ["mixture", "mix"];

/// Which of MUSDB18's subsets to evaluate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Subset {
    /// The 50 test tracks (the published scores' subset).
    Test,
    /// The 100 training tracks.
    Train,
    /// Both.
    All,
}

/// One track: its mixture and reference stems.
#[derive(Debug, Clone, PartialEq)]
pub struct TrackFolder {
    /// The folder's name.
    pub name: String,
    /// `train` or `test` in MUSDB18's layout.
    pub subset: Option<String>,
    /// The mixture file.
    pub mixture: PathBuf,
    /// The reference stems, by lower-case file name without extension, sorted.
    pub references: Vec<(String, PathBuf)>,
}

/// The audio files in `folder`, by lower-case name without extension, sorted; `.stem.mp4`
/// files (MUSDB18's compressed release) are not audio `stemflow eval` reads.
fn audio_files(folder: &Path) -> Result<Vec<(String, PathBuf)>, String> {
    let entries = std::fs::read_dir(folder).map_err(|e| format!("{}: {e}", folder.display()))?;
    let mut files = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().to_lowercase();
        if !path.is_file() || name.ends_with(".stem.mp4") {
            continue;
        }
        let Some((stem, extension)) = name.rsplit_once('.') else {
            continue;
        };
        if AUDIO_EXTENSIONS.contains(&extension) {
            files.push((stem.to_owned(), path));
        }
    }
    files.sort();
    Ok(files)
}

/// `folder` as a track, when it has a mixture file.
fn track(folder: &Path, subset: Option<&str>) -> Result<Option<TrackFolder>, String> {
    let files = audio_files(folder)?;
    let Some(position) = files
        .iter()
        .position(|(name, _)| MIXTURE_NAMES.contains(&name.as_str()))
    else {
        return Ok(None);
    };
    let mut references = files;
    let (_, mixture) = references.remove(position);
    references.retain(|(name, _)| !MIXTURE_NAMES.contains(&name.as_str()));
    Ok(Some(TrackFolder {
        name: folder
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| folder.display().to_string()),
        subset: subset.map(str::to_owned),
        mixture,
        references,
    }))
}

/// The sorted subfolders of `folder`.
fn subfolders(folder: &Path) -> Result<Vec<PathBuf>, String> {
    let mut folders: Vec<PathBuf> = std::fs::read_dir(folder)
        .map_err(|e| format!("{}: {e}", folder.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    folders.sort();
    Ok(folders)
}

/// Whether `folder` (or its subfolders) holds MUSDB18's `.stem.mp4` files.
fn has_stem_mp4(folder: &Path) -> bool {
    let holds = |f: &Path| {
        std::fs::read_dir(f).is_ok_and(|entries| {
            entries.flatten().any(|e| {
                e.file_name()
                    .to_string_lossy()
                    .to_lowercase()
                    .ends_with(".stem.mp4")
            })
        })
    };
    holds(folder) || subfolders(folder).is_ok_and(|fs| fs.iter().any(|f| holds(f)))
}

/// Every track under `dir`: `dir` itself when it is a track folder; its `train/` and `test/`
/// (as `subset` says) in MUSDB18's layout; otherwise each subfolder that is a track. An empty
/// result is an error that says what was expected.
pub fn find_tracks(dir: &Path, subset: Subset) -> Result<Vec<TrackFolder>, String> {
    if !dir.is_dir() {
        return Err(format!("{} is not a folder", dir.display()));
    }
    if let Some(track) = track(dir, None)? {
        return Ok(vec![track]);
    }
    let subsets: Vec<&str> = match subset {
        Subset::Test => vec!["test"],
        Subset::Train => vec!["train"],
        Subset::All => vec!["train", "test"],
    };
    let is_musdb = ["train", "test"].iter().any(|s| dir.join(s).is_dir());
    let mut tracks = Vec::new();
    if is_musdb {
        for name in subsets {
            let folder = dir.join(name);
            if folder.is_dir() {
                for sub in subfolders(&folder)? {
                    tracks.extend(track(&sub, Some(name))?);
                }
            }
        }
    } else {
        for sub in subfolders(dir)? {
            tracks.extend(track(&sub, None)?);
        }
    }
    if tracks.is_empty() {
        let searched = if is_musdb {
            format!("{}'s {subset:?} subset", dir.display()).to_lowercase()
        } else {
            dir.display().to_string()
        };
        return Err(if has_stem_mp4(dir) || has_stem_mp4(&dir.join("test")) {
            format!(
                "{searched} holds MUSDB18's .stem.mp4 files, which stemflow eval does not read: use MUSDB18-HQ (WAV), or decode them into track folders of WAV files first (`musdbconvert` of the musdb Python package)"
            )
        } else {
            format!(
                "no track in {searched}: a track is a folder with a mixture file (mixture.wav, as in MUSDB18-HQ) and its stems (vocals.wav, drums.wav, bass.wav, other.wav, …)"
            )
        });
    }
    Ok(tracks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, b"").unwrap();
    }

    #[test]
    fn musdb_layout_subsets_and_plain_folders() {
        let dir = std::env::temp_dir().join(format!("stemflow-dataset-{}", std::process::id()));
        for (subset, name) in [("test", "B song"), ("test", "A song"), ("train", "C song")] {
            for file in [
                "mixture.wav",
                "vocals.wav",
                "drums.WAV",
                "bass.flac",
                "other.wav",
            ] {
                touch(&dir.join(subset).join(name).join(file));
            }
        }
        touch(&dir.join("test").join("not a track").join("notes.txt"));
        let tracks = find_tracks(&dir, Subset::Test).unwrap();
        let names: Vec<&str> = tracks.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["A song", "B song"]);
        assert_eq!(tracks[0].subset.as_deref(), Some("test"));
        let stems: Vec<&str> = tracks[0]
            .references
            .iter()
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(stems, ["bass", "drums", "other", "vocals"]);
        assert_eq!(find_tracks(&dir, Subset::All).unwrap().len(), 3);
        // A subset folder, a track folder.
        assert_eq!(
            find_tracks(&dir.join("test"), Subset::Test).unwrap().len(),
            2
        );
        let one = find_tracks(&dir.join("train").join("C song"), Subset::Test).unwrap();
        assert_eq!(one[0].name, "C song");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn musdb18s_stem_mp4_files_are_named_as_not_read() {
        let dir = std::env::temp_dir().join(format!("stemflow-stemmp4-{}", std::process::id()));
        touch(&dir.join("test").join("A Song.stem.mp4"));
        let error = find_tracks(&dir, Subset::Test).unwrap_err();
        assert!(
            error.contains(".stem.mp4") && error.contains("MUSDB18-HQ"),
            "{error}"
        );
        let empty = dir.join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        let error = find_tracks(&empty, Subset::Test).unwrap_err();
        assert!(error.contains("mixture.wav"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
