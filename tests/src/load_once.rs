//! Plugin binaries loaded once per path and process and never unloaded: a Rust plugin that has
//! spawned threads cannot safely be unloaded. The CLAP library and the VST3 module share it.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// What was loaded from each path, kept for the life of the process.
pub(crate) struct LoadOnce<T: 'static>(OnceLock<Mutex<Vec<(PathBuf, &'static T)>>>);

impl<T: Sync + 'static> LoadOnce<T> {
    /// Nothing loaded yet.
    pub(crate) const fn new() -> Self {
        Self(OnceLock::new())
    }

    /// What was loaded from `path` before, or else what `load` makes of it, kept for the
    /// process. Loads under the lock, so no path is loaded twice, even by racing threads.
    pub(crate) fn get(
        &self,
        path: &Path,
        load: impl FnOnce() -> Result<T, String>,
    ) -> Result<&'static T, String> {
        let mut loaded = self
            .0
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some((_, thing)) = loaded.iter().find(|(p, _)| p == path) {
            return Ok(thing);
        }
        let thing: &'static T = Box::leak(Box::new(load()?));
        loaded.push((path.to_path_buf(), thing));
        Ok(thing)
    }
}
