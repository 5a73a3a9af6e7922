//! [`PluginBackend`] and what its background threads report back ([`Background`]); the
//! backend's behaviour is in `backend.rs` and `downloads.rs`.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use parking_lot::Mutex;
use stemflow_engine::ModelInfo;

use super::rtf_meter::RtfMeter;
use crate::editor::model::{AvailableModel, DownloadTask, ModelTask};
use crate::params::StemflowParams;
use crate::shared::PluginShared;

/// What background threads report back.
#[derive(Default)]
pub(super) struct Background {
    pub(super) models: Option<Arc<Vec<ModelInfo>>>,
    /// Catalogue models not in the user models folder, found by the last scan.
    pub(super) available: Option<Arc<[AvailableModel]>>,
    pub(super) is_scanning: bool,
    /// A scan was asked for while one ran: the running one scans again before it reports.
    pub(super) should_scan_again: bool,
    pub(super) model_task: Option<ModelTask>,
    /// The download thread's state (`None`: nothing downloading).
    pub(super) download: Option<DownloadTask>,
    /// Set to stop the running download; shared with its thread.
    pub(super) download_cancel: Option<Arc<AtomicBool>>,
    /// The last download thread started, joined when the backend goes (or before the next).
    pub(super) download_thread: Option<std::thread::JoinHandle<()>>,
    /// Alive while the download thread runs (tests: the thread ended).
    #[cfg(test)]
    pub(super) download_alive: std::sync::Weak<()>,
    /// A model a download installed, for the GUI thread to rescan and choose.
    pub(super) finished_download: Option<PathBuf>,
    pub(super) folder_error: Option<String>,
}

/// The editor's link to the plugin.
pub struct PluginBackend {
    pub(super) shared: Arc<PluginShared>,
    pub(super) params: Arc<StemflowParams>,
    pub(super) background: Arc<Mutex<Background>>,
    pub(super) rtf: RtfMeter,
}
