//! [`NewFolderGuard`]: a folder this run created, removed again if it is still empty when the
//! guard goes (an input that failed, a run that wrote nothing).

use std::path::Path;

/// A folder this run created: removed again, if still empty, when dropped without
/// [`NewFolderGuard::keep`].
pub(super) struct NewFolderGuard<'a> {
    path: &'a Path,
    should_remove: bool,
}

impl<'a> NewFolderGuard<'a> {
    /// Creates `path` (and its parents) unless it exists.
    pub fn create(path: &'a Path) -> std::io::Result<Self> {
        let existed = path.is_dir();
        std::fs::create_dir_all(path)?;
        Ok(Self {
            path,
            should_remove: !existed,
        })
    }

    /// The folder holds results: it stays.
    pub fn keep(&mut self) {
        self.should_remove = false;
    }
}

impl Drop for NewFolderGuard<'_> {
    fn drop(&mut self) {
        if self.should_remove {
            // Fails, harmlessly, when something else is in it.
            let _ = std::fs::remove_dir(self.path);
        }
    }
}
