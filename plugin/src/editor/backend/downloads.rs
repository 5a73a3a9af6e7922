//! The editor's model downloads: what the catalogue offers that the models folder lacks, and
//! the download thread ([`spawn_download`]) — one at a time, cancellable from the editor, and
//! cancelled and joined when the backend goes, so no download outlives the plugin instance.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use stemflow_fetch::catalogue::{catalogue_model, CatalogueModel, CATALOGUE};
use stemflow_fetch::download::Downloader;
use stemflow_fetch::get::{install_catalogue_model, GetOptions, ModelSource};
use stemflow_fetch::terms::terms_accepted;
use stemflow_fetch::FetchError;

use stemflow_engine::{models_dirs, ModelInfo};

use super::state::{Background, PluginBackend};
use crate::editor::model::{AvailableModel, DownloadTask};

/// The catalogue models that `found` (a scan of the models folders) lacks in `models_dir`, with
/// whether their terms were accepted. Not realtime-safe: reads the terms record.
pub(super) fn available_models(
    found: &[ModelInfo],
    models_dir: Option<&Path>,
) -> Vec<AvailableModel> {
    let Some(models_dir) = models_dir else {
        return Vec::new();
    };
    CATALOGUE
        .iter()
        .filter(|entry| {
            let installed = models_dir.join(entry.installed_file());
            !found.iter().any(|info| info.path == installed) && !installed.exists()
        })
        .map(|entry| AvailableModel {
            name: entry.name.to_owned(),
            download_bytes: entry.download_bytes(),
            stems: entry.stems.join(", "),
            source: entry.source.to_owned(),
            terms: entry.terms.to_owned(),
            quality: entry.quality.to_owned(),
            is_terms_accepted: terms_accepted(entry, models_dir),
            is_weakly_verified: entry.is_weakly_verified(),
        })
        .collect()
}

/// Installs `model` into `models_dir` from `source` on a background thread, reporting its
/// progress, failure or installed model through `background`. The user accepted its terms
/// before this is called. Not realtime-safe (it spawns a thread); returns at once.
pub(super) fn spawn_download(
    background: Arc<Mutex<Background>>,
    model: &'static CatalogueModel,
    source: ModelSource,
    models_dir: PathBuf,
) {
    let cancel = Arc::new(AtomicBool::new(false));
    let alive = Arc::new(());
    let finished = {
        let mut state = background.lock();
        if matches!(state.download, Some(DownloadTask::Running { .. })) {
            return;
        }
        state.download = Some(DownloadTask::Running {
            name: model.name.to_owned(),
            progress: None,
            is_cancelling: false,
        });
        state.download_cancel = Some(cancel.clone());
        #[cfg(test)]
        {
            state.download_alive = Arc::downgrade(&alive);
        }
        state.download_thread.take()
    };
    // The previous download's thread has reported its end: it ends at once.
    if let Some(thread) = finished {
        let _ = thread.join();
    }
    let thread_state = background.clone();
    let spawned = std::thread::Builder::new()
        .name("stemflow-model-download".into())
        .spawn(move || {
            let _alive = alive;
            let options = GetOptions {
                force: false,
                accept_terms: true,
            };
            let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
                install_catalogue_model(
                    model,
                    source,
                    &models_dir,
                    options,
                    &mut |progress| {
                        if let Some(DownloadTask::Running {
                            progress: shown, ..
                        }) = &mut thread_state.lock().download
                        {
                            *shown = Some(*progress);
                        }
                    },
                    &cancel,
                )
            }));
            let mut state = thread_state.lock();
            state.download_cancel = None;
            state.download = match result {
                Ok(Ok(installed)) => {
                    state.finished_download = Some(installed.model);
                    None
                }
                Ok(Err(FetchError::Cancelled)) => None,
                Ok(Err(error)) => Some(DownloadTask::Failed {
                    name: model.name.to_owned(),
                    error: error.to_string(),
                }),
                Err(_) => Some(DownloadTask::Failed {
                    name: model.name.to_owned(),
                    error: "the download crashed".into(),
                }),
            };
        });
    let mut state = background.lock();
    match spawned {
        Ok(thread) => state.download_thread = Some(thread),
        Err(error) => {
            state.download_cancel = None;
            state.download = Some(DownloadTask::Failed {
                name: model.name.to_owned(),
                error: format!("cannot start the download: {error}"),
            });
        }
    }
}

impl PluginBackend {
    /// Downloads the catalogue model `name` into the user models folder on a background thread
    /// (the user accepted its terms); when it is installed, [`EditorBackend::model`] rescans and
    /// chooses it.
    pub(super) fn start_download(&self, name: &str) {
        let Some(model) = catalogue_model(name) else {
            return;
        };
        let Some(models_dir) = models_dirs(&[]).into_iter().next() else {
            self.background.lock().download = Some(DownloadTask::Failed {
                name: model.name.to_owned(),
                error: "no user models folder is known on this system".into(),
            });
            return;
        };
        spawn_download(
            self.background.clone(),
            model,
            ModelSource::Download(Downloader::new()),
            models_dir,
        );
    }

    /// Asks the running download to stop; it ends at its next read.
    pub(super) fn cancel_download(&self) {
        let mut background = self.background.lock();
        if let Some(cancel) = &background.download_cancel {
            cancel.store(true, Ordering::Relaxed);
        }
        if let Some(DownloadTask::Running { is_cancelling, .. }) = &mut background.download {
            *is_cancelling = true;
        }
    }
}

impl Drop for PluginBackend {
    /// A download still running when the plugin goes away is cancelled and its thread joined,
    /// so no Stemflow code runs after the host unloads the library: it stops at its next read
    /// (the `.part` is kept for the next time, as a cancel from the editor keeps it) or its
    /// conversion's next step, and its claim on the model is released. Not realtime-safe:
    /// waits for that thread.
    fn drop(&mut self) {
        self.cancel_download();
        let thread = self.background.lock().download_thread.take();
        if let Some(thread) = thread {
            // A panic was caught in the thread; there is nothing left to report it to.
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::editor::model::{DownloadProgress, EditorAction, EditorBackend, ModelTask};
    use crate::params::StemflowParams;
    use crate::shared::PluginShared;

    /// A loopback mirror serving `body` for every path, in small pieces when `trickle`.
    fn mirror(body: Vec<u8>, trickle: bool) -> String {
        use stemflow_kit::testing::{serve_http, write_http_head, write_trickle};
        serve_http(move |_, mut stream| {
            write_http_head(&mut stream, "200 OK", "", body.len() as u64);
            let (piece, pause) = if trickle {
                (2048, Duration::from_millis(5))
            } else {
                (body.len().max(1), Duration::ZERO)
            };
            write_trickle(&mut stream, &body, piece, pause);
        })
    }

    /// A catalogue entry (made here: the real ones' checksums are of files no test has) of
    /// one ONNX file with `bytes`' checksum.
    fn test_model(bytes: &[u8]) -> &'static CatalogueModel {
        use sha2::Digest;
        use stemflow_fetch::catalogue::{Delivery, FileCheck, RemoteFile};
        let sha256: &'static str =
            Box::leak(format!("{:x}", sha2::Sha256::digest(bytes)).into_boxed_str());
        Box::leak(Box::new(CatalogueModel {
            name: "test-model",
            family: "mdx-net",
            stems: &["vocals", "instrumental"],
            delivery: Delivery::Onnx(RemoteFile {
                url: "https://owner.invalid/test-model.onnx",
                check: FileCheck {
                    sha256: Some(sha256),
                    sha256_prefix: None,
                    uvr_md5_tail: None,
                    size_bytes: Some(bytes.len() as u64),
                },
            }),
            source: "the tests",
            terms: "for testing only",
            quality: "none",
        }))
    }

    /// A models folder not made yet, in a fresh scratch folder.
    fn scratch(name: &str) -> PathBuf {
        stemflow_kit::testing::scratch_dir(&format!("editor-download-{name}")).join("models")
    }

    /// Waits until the download thread has finished.
    fn wait_for_download(backend: &PluginBackend) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while matches!(
            backend.background.lock().download,
            Some(DownloadTask::Running { .. })
        ) {
            assert!(Instant::now() < deadline, "the download never finished");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn backend() -> PluginBackend {
        PluginBackend::new(
            Arc::new(PluginShared::default()),
            Arc::new(StemflowParams::default()),
        )
    }

    /// A backend that downloaded the test model of `bytes` into `dir` from a mirror serving
    /// `served`, once its download thread reported its end.
    fn downloaded(bytes: &[u8], served: Vec<u8>, dir: &Path) -> PluginBackend {
        let backend = downloading(bytes, served, false, dir);
        wait_for_download(&backend);
        backend
    }

    /// A backend that started downloading the test model of `bytes` into `dir` from a mirror
    /// serving `served` (in small pieces when `trickle`).
    fn downloading(bytes: &[u8], served: Vec<u8>, trickle: bool, dir: &Path) -> PluginBackend {
        let url = mirror(served, trickle);
        let backend = backend();
        spawn_download(
            backend.background.clone(),
            test_model(bytes),
            ModelSource::Download(Downloader::direct().with_mirror(&url)),
            dir.to_path_buf(),
        );
        backend
    }

    #[test]
    fn a_downloaded_model_is_installed_then_scanned_and_chosen() {
        let bytes: Vec<u8> = (0..100_000u32).map(|i| (i % 241) as u8).collect();
        let dir = scratch("installed");
        let mut backend = downloaded(&bytes, bytes.clone(), &dir);
        let installed = dir.join("test-model.onnx");
        assert_eq!(std::fs::read(&installed).unwrap(), bytes);
        assert_eq!(backend.model().download, DownloadTask::Idle);
        // The next frame chose it (the fake bytes are no ONNX model, so it then fails to load,
        // leaving the running separator as it is).
        match backend.model().model_task {
            ModelTask::Loading(name) | ModelTask::Failed { name, .. } => {
                assert_eq!(name, "test-model")
            }
            ModelTask::Idle => panic!("the downloaded model was not chosen"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_download_that_fails_its_check_says_why_and_installs_nothing() {
        let bytes: Vec<u8> = (0..100_000u32).map(|i| (i % 241) as u8).collect();
        let mut wrong = bytes.clone();
        wrong[10] ^= 1;
        let dir = scratch("wrong");
        let mut backend = downloaded(&bytes, wrong, &dir);
        match backend.model().download {
            DownloadTask::Failed { name, error } => {
                assert_eq!(name, "test-model");
                assert!(error.contains("SHA-256"), "{error}");
            }
            other => panic!("{other:?}"),
        }
        assert!(!dir.join("test-model.onnx").exists());
        assert_eq!(backend.model().model_task, ModelTask::Idle);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A backend downloading a 400 kB model from a trickling mirror into `dir`, once the
    /// first bytes arrived.
    fn backend_mid_download(dir: &Path) -> PluginBackend {
        let bytes: Vec<u8> = (0..400_000u32).map(|i| (i % 241) as u8).collect();
        let mut backend = downloading(&bytes, bytes.clone(), true, dir);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !matches!(
            backend.model().download,
            DownloadTask::Running {
                progress: Some(DownloadProgress {
                    done_bytes: 1..,
                    ..
                }),
                ..
            }
        ) {
            assert!(Instant::now() < deadline, "no progress");
            std::thread::sleep(Duration::from_millis(2));
        }
        backend
    }

    #[test]
    fn a_cancelled_download_stops_without_installing_and_keeps_its_part() {
        let dir = scratch("cancelled");
        let mut backend = backend_mid_download(&dir);
        backend.perform(EditorAction::CancelDownload);
        assert!(matches!(
            backend.model().download,
            DownloadTask::Running {
                is_cancelling: true,
                ..
            } | DownloadTask::Idle
        ));
        wait_for_download(&backend);
        assert_eq!(backend.model().download, DownloadTask::Idle);
        assert!(!dir.join("test-model.onnx").exists());
        assert!(dir.join(".downloads/test-model.onnx.part").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Every file under `dir`, relative to it, sorted.
    fn files_under(dir: &Path) -> Vec<String> {
        let mut files = Vec::new();
        let mut folders = vec![dir.to_path_buf()];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    folders.push(path);
                } else {
                    let relative = path.strip_prefix(dir).unwrap();
                    files.push(relative.to_string_lossy().into_owned());
                }
            }
        }
        files.sort();
        files
    }

    #[test]
    fn dropping_the_backend_mid_download_cancels_and_joins_its_thread() {
        let dir = scratch("dropped");
        let backend = backend_mid_download(&dir);
        let background = backend.background.clone();
        let alive = background.lock().download_alive.clone();
        assert!(alive.upgrade().is_some(), "the download thread runs");
        // What a host does when it destroys the instance (and its editor) mid-download.
        drop(backend);
        assert!(
            alive.upgrade().is_none(),
            "the download thread ended before the backend was gone"
        );
        assert!(background.lock().download_thread.is_none());
        // Nothing under the model's name, no claim, no temporary file: only the part a
        // cancelled download keeps for the next attempt (and the terms acceptance).
        let files = files_under(&dir);
        assert!(
            files.iter().all(|name| name == ".terms-accepted.json"
                || name.starts_with(".downloads/test-model.onnx.part")),
            "{files:?}"
        );
        assert!(files.contains(&".downloads/test-model.onnx.part".to_owned()));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
