//! [`Claim`]: one worker at a time on a stem folder. Catalogue workers may be handed the same
//! input at once (a retried pod while the first still runs, the same command started twice,
//! two Ray actors given one song); without a claim both write the same files, and one fails
//! half-way through the other's stems. A worker claims a folder before it looks at it, by
//! creating `.stemflow-claim` in it, and removes the claim when it is done with the folder,
//! however it ends. A worker that finds the folder claimed comes back to it later, or waits,
//! and says so. The claim itself — exclusive creation, the heartbeat, when a claim is stale and
//! taken over — is `stemflow_paths::claim`'s, which model fetches use too.

use std::path::{Path, PathBuf};
use std::time::Duration;

use stemflow_paths::claim::{self, ClaimOutcome, Holder};

use super::options::{Failure, SeparateOptions};
use crate::decode::io_reason;

/// The claim's file name in a stem folder.
pub const CLAIM_FILE: &str = ".stemflow-claim";

/// This worker's claim on a stem folder: removed when dropped, with the folder when this claim
/// created it and it is still empty.
pub struct Claim {
    /// `None` only while dropping.
    claim: Option<claim::Claim>,
    created_folder: Option<PathBuf>,
}

/// What [`Claim::take`] found.
pub enum FolderOutcome {
    /// The folder is this worker's until the claim is dropped.
    Taken(Claim),
    /// Another worker, alive, holds the folder (who, when its claim can be read).
    Held(Option<Holder>),
}

impl Claim {
    /// Claims `folder` (created when missing) unless a live worker holds it; a stale claim is
    /// taken over. Not realtime-safe: file I/O.
    pub fn take(folder: &Path) -> std::io::Result<FolderOutcome> {
        let existed = folder.is_dir();
        std::fs::create_dir_all(folder)?;
        let created_folder = (!existed).then(|| folder.to_path_buf());
        let outcome = claim::Claim::take(&folder.join(CLAIM_FILE));
        if !matches!(outcome, Ok(ClaimOutcome::Taken(_))) {
            if let Some(folder) = &created_folder {
                let _ = std::fs::remove_dir(folder);
            }
        }
        Ok(match outcome? {
            ClaimOutcome::Taken(claim) => FolderOutcome::Taken(Claim {
                claim: Some(claim),
                created_folder,
            }),
            ClaimOutcome::Held(holder) => FolderOutcome::Held(holder),
        })
    }

    /// Who this claim names (this process).
    #[cfg(test)]
    pub fn holder(&self) -> &Holder {
        self.claim.as_ref().expect("held until dropped").holder()
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        // The claim file first, so that the folder may be empty.
        drop(self.claim.take());
        if let Some(folder) = &self.created_folder {
            // Fails, harmlessly, when something is in it.
            let _ = std::fs::remove_dir(folder);
        }
    }
}

/// Claims `folder` for `input`'s job. When another worker holds it: `None`
/// when `may_defer` (the caller takes the job up later), otherwise waits for it, saying so once.
/// Returns the claim and the worker waited for, if any.
pub(super) fn claim_folder(
    folder: &Path,
    input: &Path,
    may_defer: bool,
) -> Result<Option<(Claim, Option<Holder>)>, Failure> {
    let mut waited_for: Option<Holder> = None;
    let mut has_said = false;
    loop {
        let outcome = Claim::take(folder).map_err(|e| {
            Failure::Input(format!(
                "cannot claim {}: {}",
                folder.display(),
                io_reason(&e)
            ))
        })?;
        let holder = match outcome {
            FolderOutcome::Taken(claim) => return Ok(Some((claim, waited_for))),
            FolderOutcome::Held(holder) => holder,
        };
        let who = holder.as_ref().map_or_else(
            || "another worker".to_owned(),
            |h| format!("another worker ({})", h.describe()),
        );
        if may_defer {
            crate::output::say_err!(
                "stemflow: {}: {} is being separated by {who}; back to it after the other inputs",
                input.display(),
                folder.display()
            );
            return Ok(None);
        }
        if !has_said {
            crate::output::say_err!(
                "stemflow: {}: waiting for {who}, which is separating it into {}",
                input.display(),
                folder.display()
            );
            has_said = true;
        }
        waited_for = holder.or(waited_for);
        if let Some(signal) = crate::interrupt::received() {
            return Err(Failure::Interrupted(signal));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The stem files of `options` in `folder`, when every one is there and was written after
/// `other` claimed the folder: that worker separated it.
pub(super) fn stems_written_since(
    folder: &Path,
    options: &SeparateOptions,
    other: &Holder,
) -> Option<Vec<PathBuf>> {
    let since = std::time::UNIX_EPOCH + Duration::from_secs(other.since_unix_s);
    options
        .stems
        .iter()
        .map(|&stem| {
            let path = options.stem_path(folder, stem);
            let modified = std::fs::metadata(&path).ok()?.modified().ok()?;
            (modified >= since).then_some(path)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_excludes_a_second_one_and_goes_with_its_folder() {
        let folder =
            std::env::temp_dir().join(format!("stemflow-folder-claim-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&folder);
        let FolderOutcome::Taken(claim) = Claim::take(&folder).unwrap() else {
            panic!("the first claim was refused");
        };
        // Same process: alive, so the second worker is told who holds it.
        match Claim::take(&folder).unwrap() {
            FolderOutcome::Held(holder) => assert_eq!(holder.as_ref(), Some(claim.holder())),
            FolderOutcome::Taken(_) => panic!("two claims on one folder"),
        }
        drop(claim);
        assert!(
            !folder.exists(),
            "the folder the claim created is removed when empty"
        );
        let FolderOutcome::Taken(claim) = Claim::take(&folder).unwrap() else {
            panic!("a released claim could not be taken again");
        };
        std::fs::write(folder.join("vocals.wav"), b"stem").unwrap();
        drop(claim);
        assert!(!folder.join(CLAIM_FILE).exists());
        assert!(
            folder.join("vocals.wav").exists(),
            "a folder with results stays"
        );
        std::fs::remove_dir_all(&folder).unwrap();
    }
}
