//! Catalogue input: [`Job`]s from a JSON-lines manifest (a file, or standard input for a
//! long-lived worker) and [`Shard`], a stable split of them between workers.
//!
//! A manifest line is a JSON object: `{"input": "songs/a.flac", "output": "a"}`. `input` is a
//! file path (relative paths are relative to the manifest's folder; standard input's are
//! relative to the working folder); `output`, optional, names the stem folder (default: the
//! input's file name without its extension). Blank lines are skipped.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// One input to separate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// The input as the user wrote it (what result lines and shards use).
    pub given: String,
    /// The input file.
    pub input: PathBuf,
    /// The stem folder's name; `None`: the input's file name without its extension.
    pub name: Option<String>,
}

impl Job {
    /// A job for a path given on the command line.
    pub fn from_path(path: &Path) -> Self {
        Job {
            given: path.display().to_string(),
            input: path.to_path_buf(),
            name: None,
        }
    }
}

/// A manifest line that is not a job: its number and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    /// The line as written (for the result line's `input`).
    pub given: String,
    /// What is wrong, with the line number.
    pub reason: String,
}

/// Parses manifest line `number` (1-based); `None` for a blank line. Relative inputs are
/// joined to `base`.
pub fn parse_line(line: &str, number: usize, base: &Path) -> Option<Result<Job, BadLine>> {
    let text = line.trim();
    if text.is_empty() {
        return None;
    }
    let bad = |reason: String| BadLine {
        given: text.to_owned(),
        reason: format!("manifest line {number}: {reason}"),
    };
    let value: serde_json::Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) => return Some(Err(bad(format!("not JSON ({e})")))),
    };
    let Some(object) = value.as_object() else {
        return Some(Err(bad("a line is a JSON object with \"input\"".into())));
    };
    if let Some(key) = object.keys().find(|k| *k != "input" && *k != "output") {
        return Some(Err(bad(format!(
            "unknown key \"{key}\" (a line has \"input\" and, optionally, \"output\")"
        ))));
    }
    let Some(given) = object.get("input").and_then(|v| v.as_str()) else {
        return Some(Err(bad("\"input\" (a file path string) is missing".into())));
    };
    if given.trim().is_empty() {
        return Some(Err(bad("\"input\" is empty".into())));
    }
    if given.contains("://") {
        return Some(Err(BadLine {
            given: given.to_owned(),
            reason: format!(
                "manifest line {number}: {given} is a URL; Stemflow reads files (download it first)"
            ),
        }));
    }
    let name = match object.get("output") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(name)) => match check_folder_name(name) {
            Ok(()) => Some(name.clone()),
            Err(reason) => {
                return Some(Err(BadLine {
                    given: given.to_owned(),
                    reason: format!("manifest line {number}: {reason}"),
                }))
            }
        },
        Some(_) => return Some(Err(bad("\"output\" must be a folder name string".into()))),
    };
    let path = Path::new(given);
    let input = if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    };
    Some(Ok(Job {
        given: given.to_owned(),
        input,
        name,
    }))
}

/// An output name is one folder name: no separators, not `.` or `..`.
fn check_folder_name(name: &str) -> Result<(), String> {
    if name.trim().is_empty()
        || name == "."
        || name == ".."
        || name.contains(['/', '\\'])
        || name.contains('\0')
    {
        return Err(format!(
            "\"output\" {name:?} must be a single folder name (no / or \\, not . or ..)"
        ));
    }
    Ok(())
}

/// Reads every job of a manifest file. Not realtime-safe.
pub fn read_manifest(path: &Path) -> Result<Vec<Result<Job, BadLine>>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the manifest {}: {e}", path.display()))?;
    let base = path.parent().unwrap_or(Path::new(""));
    Ok(text
        .lines()
        .enumerate()
        .filter_map(|(index, line)| parse_line(line, index + 1, base))
        .collect())
}

/// The jobs of standard input, each as soon as its line arrives (a long-lived worker: one
/// result line comes back per job line). Not realtime-safe.
pub fn stdin_jobs() -> impl Iterator<Item = Result<Job, BadLine>> {
    let base = PathBuf::new();
    std::io::stdin()
        .lock()
        .lines()
        .enumerate()
        .filter_map(move |(index, line)| match line {
            Ok(line) => parse_line(&line, index + 1, &base),
            Err(e) => Some(Err(BadLine {
                given: String::new(),
                reason: format!("standard input line {}: {e}", index + 1),
            })),
        })
}

/// `--shard i/n`: this worker takes the jobs whose input hashes to `i` modulo `n`, so every job
/// belongs to exactly one of the `n` shards, whatever order the manifest lists them in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This shard, `0..count`.
    pub index: u64,
    /// How many shards there are.
    pub count: u64,
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let usage = || format!("--shard takes i/n with 0 <= i < n (e.g. 0/4), not {text:?}");
        let (index, count) = text.split_once('/').ok_or_else(usage)?;
        let index: u64 = index.trim().parse().map_err(|_| usage())?;
        let count: u64 = count.trim().parse().map_err(|_| usage())?;
        if count == 0 || index >= count {
            return Err(usage());
        }
        Ok(Shard { index, count })
    }
}

impl Shard {
    /// Whether the job whose input is written `given` belongs to this shard.
    pub fn contains(&self, given: &str) -> bool {
        let digest = Sha256::digest(given.as_bytes());
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        u64::from_le_bytes(first) % self.count == self.index
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_become_jobs_or_say_what_is_wrong() {
        let base = Path::new("/music");
        let job = parse_line(r#"{"input": "a/b.flac", "output": "b"}"#, 1, base)
            .unwrap()
            .unwrap();
        assert_eq!(job.input, PathBuf::from("/music/a/b.flac"));
        assert_eq!(job.name.as_deref(), Some("b"));
        assert_eq!(job.given, "a/b.flac");
        let job = parse_line(r#"{"input": "/x/y.wav"}"#, 2, base)
            .unwrap()
            .unwrap();
        assert_eq!(job.input, PathBuf::from("/x/y.wav"));
        assert_eq!(job.name, None);
        assert!(parse_line("   ", 3, base).is_none());
        for (line, expected) in [
            ("{", "line 4: not JSON"),
            ("[1]", "JSON object"),
            (r#"{"path": "a"}"#, "unknown key \"path\""),
            (r#"{"output": "a"}"#, "\"input\""),
            (r#"{"input": ""}"#, "empty"),
            (r#"{"input": "https://x/a.mp3"}"#, "is a URL"),
            (r#"{"input": "a", "output": "../up"}"#, "single folder name"),
            (r#"{"input": "a", "output": ".."}"#, "single folder name"),
            (r#"{"input": "a", "output": 3}"#, "folder name string"),
        ] {
            let error = parse_line(line, 4, base).unwrap().unwrap_err();
            assert!(error.reason.contains(expected), "{line}: {}", error.reason);
        }
    }

    #[test]
    fn every_input_belongs_to_exactly_one_shard() {
        let inputs: Vec<String> = (0..1000).map(|i| format!("songs/{i}.flac")).collect();
        for count in [1u64, 2, 3, 7] {
            let shards: Vec<Shard> = (0..count).map(|index| Shard { index, count }).collect();
            let mut sizes = vec![0usize; count as usize];
            for input in &inputs {
                let owners: Vec<&Shard> = shards.iter().filter(|s| s.contains(input)).collect();
                assert_eq!(owners.len(), 1, "{input} in {count} shards");
                sizes[owners[0].index as usize] += 1;
            }
            // A fair split: no shard holds more than twice its share.
            assert!(
                sizes.iter().all(|&n| n <= 2 * 1000 / count as usize),
                "{sizes:?}"
            );
        }
        assert_eq!(
            "1/4".parse::<Shard>().unwrap(),
            Shard { index: 1, count: 4 }
        );
        for bad in ["4/4", "1/0", "a/2", "1", "-1/2"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }
}
