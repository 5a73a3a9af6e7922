//! Small helpers the tasks share: copying folders, hashing files, finding Python.

use std::path::Path;
use std::process::Command;

use nice_plug_xtask::Result;

/// Copies a file or a whole folder (bundles are folders on macOS and for VST3).
pub fn copy_recursively(from: &Path, to: &Path) -> Result<()> {
    if from.is_dir() {
        if to.is_file() {
            std::fs::remove_file(to)?;
        }
        std::fs::create_dir_all(to)?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            copy_recursively(&entry.path(), &to.join(entry.file_name()))?;
        }
    } else {
        if to.is_dir() {
            std::fs::remove_dir_all(to)?;
        }
        std::fs::copy(from, to)?;
    }
    Ok(())
}

/// SHA-256 of a file, lower-case hex.
pub fn sha256_hex(path: &Path) -> Result<String> {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    let mut file = std::fs::File::open(path)?;
    std::io::copy(&mut file, &mut hasher)?;
    Ok(format!("{:x}", hasher.finalize()))
}

/// The Python 3 on the path (`python3`, else `python`).
pub fn python() -> Result<&'static str> {
    for candidate in ["python3", "python"] {
        if Command::new(candidate)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return Ok(candidate);
        }
    }
    anyhow::bail!("fetching ONNX Runtime needs Python 3 with pip (to download the wheel from PyPI)")
}
