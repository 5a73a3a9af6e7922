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

/// Whether this process runs as root.
fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Runs a command as root: directly when this process is root, else through passwordless sudo.
pub fn as_root(command_line: &[&str]) -> Result<()> {
    let (program, args) = command_line
        .split_first()
        .ok_or_else(|| anyhow::anyhow!("as_root: no command"))?;
    let mut command = if is_root() {
        Command::new(program)
    } else {
        let mut sudo = Command::new("sudo");
        sudo.args(["-n", program]);
        sudo
    };
    command.args(args).env("DEBIAN_FRONTEND", "noninteractive");
    eprintln!("xtask: running {command:?}");
    let status = command.status()?;
    if !status.success() {
        anyhow::bail!("{command:?} failed with {status}");
    }
    Ok(())
}

/// Installs Debian packages with apt-get (as root, or through passwordless sudo).
pub fn apt_install(packages: &[&str]) -> Result<()> {
    let install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends"];
    as_root(&["apt-get", "update", "-qq"])
        .and_then(|()| as_root(&[&install[..], packages].concat()))
        .map_err(|error| {
            anyhow::anyhow!(
                "installing Debian's {} failed ({error}): run `sudo apt-get install \
                 --no-install-recommends {}`",
                packages.join(", "),
                packages.join(" ")
            )
        })
}
