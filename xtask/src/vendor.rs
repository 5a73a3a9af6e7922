//! `cargo xtask vendor`: `vendor/` is the crates.io release of nice-plug and nice-plug-core plus
//! the patch series in `vendor/patches/` (one patch per wrapper bug, each naming its test).
//!
//! - `cargo xtask vendor` re-creates `vendor/nice-plug*` from the releases and the patches.
//! - `cargo xtask vendor --check` fails when `vendor/` differs from that (CI runs it).
//! - `cargo xtask vendor --new-patch NAME -m MESSAGE` turns what was edited in `vendor/` since the
//!   last patch into `vendor/patches/NNNN-NAME.patch`.
//!
//! The releases are downloaded from crates.io (checked against pinned SHA-256 sums) into
//! `target/vendor-crates/` and unpacked in Rust (no Python); the series is applied with `git am`
//! in `target/vendor-work/`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use nice_plug_xtask::Result;
use ureq::tls::{RootCerts, TlsConfig};

use crate::tools::{copy_recursively, sha256_hex};

/// A crate release the vendored copy starts from.
struct Release {
    name: &'static str,
    version: &'static str,
    /// SHA-256 of the `.crate` file (as crates.io's index lists it).
    sha256: &'static str,
}

const RELEASES: [Release; 2] = [
    Release {
        name: "nice-plug",
        version: "0.4.2",
        sha256: "3f47be74bed3e8aa17bb055d4ff89af1fb016aa0d2756cd9b6c029a3743676a5",
    },
    Release {
        name: "nice-plug-core",
        version: "0.4.2",
        sha256: "ab8fe3f3e395c1140d7519a78069b59b2e3bf6da2b904d0c54ad7ab49a60ba09",
    },
];

/// Files of a published `.crate` that a path dependency does not read (the manifest before
/// cargo normalised it, and a lock file cargo ignores in a dependency): `vendor/` leaves them out.
const UNUSED_FILES: [&str; 2] = ["Cargo.toml.orig", "Cargo.lock"];

/// No release vendored is larger.
const MAX_CRATE_BYTES: u64 = 64 << 20;

const PATCHES_DIR: &str = "vendor/patches";
const WORK_DIR: &str = "target/vendor-work";

/// The identity `git am` and `git commit` record in the throwaway work repository (and in new
/// patches).
const GIT_IDENTITY: [&str; 4] = [
    "-c",
    "user.name=Stemflow developers",
    "-c",
    "user.email=developers@stemflow.audio",
];

pub fn vendor(args: &[String]) -> Result<()> {
    match args {
        [] => write(),
        [check] if check == "--check" => check_vendor(),
        [flag, name, m, message] if flag == "--new-patch" && m == "-m" => new_patch(name, message),
        _ => anyhow::bail!("usage: cargo xtask vendor [--check | --new-patch NAME -m MESSAGE]"),
    }
}

/// Replaces `vendor/<crate>` with the release plus the patch series.
fn write() -> Result<()> {
    let work = stage()?;
    for release in &RELEASES {
        let target = Path::new("vendor").join(release.name);
        if target.exists() {
            std::fs::remove_dir_all(&target)?;
        }
        copy_recursively(&work.join(release.name), &target)?;
    }
    eprintln!(
        "xtask: vendor/ re-created from the releases and {} patches",
        patch_files()?.len()
    );
    Ok(())
}

/// Fails, naming the files, when `vendor/` is not the release plus the patch series.
fn check_vendor() -> Result<()> {
    let work = stage()?;
    let mut differences = patches_without_upstream_note()?;
    for release in &RELEASES {
        let expected = work.join(release.name);
        let actual = Path::new("vendor").join(release.name);
        let mut files = relative_files(&expected)?;
        files.extend(relative_files(&actual)?);
        files.sort();
        files.dedup();
        for file in files {
            let want = std::fs::read(expected.join(&file)).ok();
            let have = std::fs::read(actual.join(&file)).ok();
            match (want, have) {
                (Some(want), Some(have)) if want == have => {}
                (Some(_), Some(_)) => {
                    differences.push(format!("{} differs", actual.join(&file).display()))
                }
                (Some(_), None) => {
                    differences.push(format!("{} is missing", actual.join(&file).display()))
                }
                (None, _) => differences.push(format!(
                    "{} is not in the release",
                    actual.join(&file).display()
                )),
            }
        }
    }
    if !differences.is_empty() {
        anyhow::bail!(
            "vendor/ is not the crates.io releases plus vendor/patches/, each saying where it \
             stands upstream:\n  {}\nMake the change a patch (`cargo xtask vendor --new-patch \
             NAME -m MESSAGE`, the message with an `Upstream:` line) or re-create vendor/ \
             (`cargo xtask vendor`)",
            differences.join("\n  ")
        );
    }
    eprintln!(
        "xtask: vendor/ is the releases plus {} patches",
        patch_files()?.len()
    );
    Ok(())
}

/// Writes what `vendor/` holds beyond the release plus the series as the next patch.
fn new_patch(name: &str, message: &str) -> Result<()> {
    let is_plain_name = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !is_plain_name {
        anyhow::bail!("a patch name is letters, digits, '-' and '_' (got {name:?})");
    }
    let work = stage()?;
    for release in &RELEASES {
        let staged = work.join(release.name);
        std::fs::remove_dir_all(&staged)?;
        copy_recursively(&Path::new("vendor").join(release.name), &staged)?;
    }
    git(&work, &["add", "-A"])?;
    let has_changes = !Command::new("git")
        .current_dir(&work)
        .args(["diff", "--cached", "--quiet"])
        .status()?
        .success();
    if !has_changes {
        anyhow::bail!("vendor/ already equals the releases plus the patch series: nothing to save");
    }
    git(&work, &["commit", "-q", "-m", message])?;
    let output = Command::new("git")
        .current_dir(&work)
        .args([
            "format-patch",
            "--stdout",
            "-1",
            "--zero-commit",
            "--no-signature",
            "-N",
            "HEAD",
        ])
        .output()?;
    if !output.status.success() {
        anyhow::bail!(
            "git format-patch failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let number = patch_files()?.len() + 1;
    let path = Path::new(PATCHES_DIR).join(format!("{number:04}-{name}.patch"));
    std::fs::write(&path, output.stdout)?;
    eprintln!("xtask: wrote {}", path.display());
    Ok(())
}

/// The patch series, in the order it is applied.
fn patch_files() -> Result<Vec<PathBuf>> {
    let mut patches: Vec<PathBuf> = std::fs::read_dir(PATCHES_DIR)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "patch"))
        .collect();
    patches.sort();
    Ok(patches)
}

/// A fresh git repository in `target/vendor-work` holding the releases (first commit) with the
/// series applied, one commit per patch. Returns its path.
fn stage() -> Result<PathBuf> {
    let work = std::env::current_dir()?.join(WORK_DIR);
    if work.exists() {
        std::fs::remove_dir_all(&work)?;
    }
    std::fs::create_dir_all(&work)?;
    for release in &RELEASES {
        let archive = download(release)?;
        extract_crate(&archive, &work)?;
        let unpacked = work.join(format!("{}-{}", release.name, release.version));
        let folder = work.join(release.name);
        std::fs::rename(&unpacked, &folder)?;
        for unused in UNUSED_FILES {
            let _ = std::fs::remove_file(folder.join(unused));
        }
    }
    git(&work, &["init", "-q"])?;
    git(&work, &["add", "-A"])?;
    git(&work, &["commit", "-q", "-m", "The crates.io releases"])?;
    for patch in patch_files()? {
        let patch = std::fs::canonicalize(&patch)?;
        if let Err(error) = git(
            &work,
            &["am", "-q", "--whitespace=nowarn", &patch.to_string_lossy()],
        ) {
            anyhow::bail!(
                "{} does not apply to the releases plus the patches before it: {error}",
                patch.display()
            );
        }
    }
    Ok(work)
}

/// The release's `.crate` file, downloaded once into `target/vendor-crates/` and checked.
fn download(release: &Release) -> Result<PathBuf> {
    let cache = Path::new("target/vendor-crates");
    std::fs::create_dir_all(cache)?;
    let file = format!("{}-{}.crate", release.name, release.version);
    let path = cache.join(&file);
    if !sha256_hex(&path).is_ok_and(|sum| sum == release.sha256) {
        let url = format!("https://static.crates.io/crates/{}/{file}", release.name);
        let partial = cache.join(format!("{file}.partial"));
        eprintln!("xtask: downloading {url}");
        download_to(&url, &partial)?;
        let sum = sha256_hex(&partial)?;
        if sum != release.sha256 {
            let _ = std::fs::remove_file(&partial);
            anyhow::bail!(
                "{url} has SHA-256 {sum}, expected {}: refusing it",
                release.sha256
            );
        }
        std::fs::rename(&partial, &path)?;
    }
    Ok(path)
}

/// Runs git in `dir` with the work repository's identity and fixed dates (so patches written
/// from it do not depend on the clock).
fn git(dir: &Path, args: &[&str]) -> Result<()> {
    let output = Command::new("git")
        .current_dir(dir)
        .args(GIT_IDENTITY)
        .args(args)
        .env("GIT_AUTHOR_DATE", "2026-11-25T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2026-11-25T00:00:00Z")
        .output()?;
    if !output.status.success() {
        anyhow::bail!(
            "git {} failed: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// Downloads `url` into `path` over HTTPS, with the system's certificates (so proxies the
/// system trusts work) and the proxy environment.
fn download_to(url: &str, path: &Path) -> Result<()> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .tls_config(
            TlsConfig::builder()
                .root_certs(RootCerts::PlatformVerifier)
                .build(),
        )
        .proxy(ureq::Proxy::try_from_env())
        .timeout_global(Some(Duration::from_secs(300)))
        .build()
        .into();
    let mut response = agent
        .get(url)
        .call()
        .map_err(|e| anyhow::anyhow!("{url}: {e}"))?;
    let mut out = std::fs::File::create(path)?;
    std::io::copy(
        &mut response
            .body_mut()
            .with_config()
            .limit(MAX_CRATE_BYTES)
            .reader(),
        &mut out,
    )?;
    out.sync_all()?;
    Ok(())
}

/// Unpacks a `.crate` (a gzipped tar holding `NAME-VERSION/…`) into `into`; entries that would
/// land outside it are skipped.
fn extract_crate(archive: &Path, into: &Path) -> Result<()> {
    let file = std::fs::File::open(archive)?;
    tar::Archive::new(flate2::read::GzDecoder::new(file)).unpack(into)?;
    Ok(())
}

/// Patches whose message has no `Upstream:` line (sent to nice-plug, with the link, or why not).
fn patches_without_upstream_note() -> Result<Vec<String>> {
    let mut missing = Vec::new();
    for patch in patch_files()? {
        let text = std::fs::read_to_string(&patch)?;
        let message = text.split("\n---\n").next().unwrap_or_default();
        if !message.lines().any(|line| line.starts_with("Upstream:")) {
            missing.push(format!(
                "{} does not say where it stands upstream (an `Upstream:` line)",
                patch.display()
            ));
        }
    }
    Ok(missing)
}

/// Every file below `root`, as paths relative to it.
fn relative_files(root: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(relative) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(root.join(&relative)) else {
            continue;
        };
        for entry in entries {
            let entry = entry?;
            let path = relative.join(entry.file_name());
            if entry.file_type()?.is_dir() {
                pending.push(path);
            } else {
                files.push(path);
            }
        }
    }
    Ok(files)
}
