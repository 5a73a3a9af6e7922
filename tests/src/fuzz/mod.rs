//! The project's plugin fuzzer: seeded, deterministic per seed, run by `cargo xtask fuzz
//! --minutes N` (and for about a minute by `cargo xtask test`, `tests/tests/fuzz.rs`), replayed
//! with `cargo xtask fuzz --seed S`.
//!
//! A seed drives the built plugin as many hosts would, through its C interfaces:
//! - **CLAP** ([`clap_seed`]): which host extensions exist (latency, tail, state, params,
//!   audio-ports and audio-ports-config rescans, thread-check), which plugin of the bundle,
//!   port configurations, render mode, standard and random sample rates (1 kHz–384 kHz), block
//!   size ranges (1–16,384 frames), in-place, missing-bus and 64-bit-only buffers, parameter
//!   values (sample-accurate, without cookies, out of range, non-finite, unknown ids),
//!   modulation, gestures, transport (also mid-block), note and MIDI events the plugin has no
//!   port for, events out of order or past the block, a full output queue, resets, stop/start,
//!   input with NaN, infinity and subnormals; from the main thread while the audio thread
//!   processes: state saved and loaded in 1–64-byte chunks, corrupted states, states naming
//!   another model (the model swapped while processing: ONNX test models, routes, fault plans
//!   that panic, fail or run slow, missing and broken files), parameter text round trips, render
//!   mode switches, queries; instances created and destroyed on up to four threads at once.
//! - **VST3** ([`vst3_seed`]): components created and released on several threads, initialise,
//!   get/set state (own, chunked, corrupted, another model), edit-controller calls, bus
//!   arrangements and activations, setupProcessing at random rates, block sizes and modes,
//!   setActive, process with parameter changes and per-call modes, terminate, release.
//!
//! Checked: nothing crashes or hangs; every output sample the plugin writes is finite and below
//! [`MAX_OUTPUT_MAGNITUDE`]; activation at any of those rates and block sizes succeeds;
//! `process()` never reports an error for valid input; the plugin's own state saves and loads
//! back; main-thread-only host callbacks come on the main thread. The plugin under test is the
//! debug build with allocation checks in `process()`, so an allocation there aborts the seed.

pub mod clap_instance;
pub mod clap_seed;
pub mod events;
pub mod rng;
pub mod signal;
pub mod state_edit;
pub mod vst3_seed;

use std::path::{Path, PathBuf};

/// The largest output magnitude a seed accepts (input is within ±1 and stem gains are at most
/// +12 dB, so anything near this is a fault, not music).
pub const MAX_OUTPUT_MAGNITUDE: f32 = 1_000.0;

/// Which plugin format a seed drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `Stemflow.clap`.
    Clap,
    /// `Stemflow.vst3`.
    Vst3,
}

impl Format {
    /// The format seed `seed` drives when both are available: one seed in four is VST3.
    pub fn for_seed(seed: u64, has_vst3: bool) -> Self {
        if has_vst3 && seed % 4 == 3 {
            Format::Vst3
        } else {
            Format::Clap
        }
    }
}

/// What the fuzzer runs against.
#[derive(Debug, Clone)]
pub struct Target {
    /// The CLAP library.
    pub clap: PathBuf,
    /// The VST3 bundle, if it is fuzzed too.
    pub vst3: Option<PathBuf>,
    /// Separator ids a state may name (`builtin`, `file:/…`).
    pub separators: Vec<String>,
}

impl Target {
    /// The artefacts the test build made (`STEMFLOW_TEST_CLAP`, `STEMFLOW_TEST_VST3`), with
    /// separators from the test fixtures (`STEMFLOW_FIXTURES_DIR`) and fault plans, missing
    /// and broken files written into `scratch`.
    pub fn from_env(scratch: &Path) -> Result<Self, String> {
        let clap = std::env::var_os(crate::PLUGIN_PATH_ENV)
            .map(PathBuf::from)
            .ok_or_else(|| {
                format!(
                    "{} is not set (run through cargo xtask)",
                    crate::PLUGIN_PATH_ENV
                )
            })?;
        let vst3 = std::env::var_os("STEMFLOW_TEST_VST3").map(PathBuf::from);
        let fixtures = std::env::var_os("STEMFLOW_FIXTURES_DIR").map(PathBuf::from);
        Ok(Self {
            clap,
            vst3,
            separators: separators(fixtures.as_deref(), scratch)?,
        })
    }
}

/// The separators states may name: the built-in, the fixtures' test models (when there), a
/// route, fault plans, a missing file and files that are not models.
fn separators(fixtures: Option<&Path>, scratch: &Path) -> Result<Vec<String>, String> {
    std::fs::create_dir_all(scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    let write = |name: &str, contents: &[u8]| -> Result<String, String> {
        let path = scratch.join(name);
        std::fs::write(&path, contents).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(format!("file:{}", path.display()))
    };
    let mut list = vec!["builtin".to_string(), "builtin".to_string()];
    for plan in [
        "panic_at_hop=2",
        "error_at_hop=1",
        "slow=2",
        "device_fails_at_hop=1",
    ] {
        let name = format!("{}.stemflow-fault", plan.replace('=', "-"));
        list.push(write(&name, plan.as_bytes())?);
    }
    list.push(write("garbage.onnx", b"\x08\x07not a model at all")?);
    list.push(write("empty.onnx", b"")?);
    list.push(format!("file:{}", scratch.join("missing.onnx").display()));
    if let Some(fixtures) = fixtures {
        for model in [
            "spleeter_test.onnx",
            "mdx_vocals_test.onnx",
            "roformer_test.onnx",
            "faulty_nan.onnx",
            "faulty_short.onnx",
        ] {
            let path = fixtures.join(model);
            if path.is_file() {
                list.push(format!("file:{}", path.display()));
            }
        }
        let route = scratch.join("fuzz.stemflow-route");
        let spleeter = fixtures.join("spleeter_test.onnx");
        if spleeter.is_file() {
            let json = serde_json::json!({
                "name": "fuzz route",
                "stages": [
                    {"separator": spleeter.display().to_string(), "stems": ["vocals"]},
                    {"separator": "builtin"}
                ]
            });
            std::fs::write(&route, json.to_string()).map_err(|e| e.to_string())?;
            list.push(format!("file:{}", route.display()));
        }
    }
    Ok(list)
}

/// What one seed did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeedReport {
    /// Instances created.
    pub instances: u64,
    /// Activations.
    pub activations: u64,
    /// `process()` calls.
    pub process_calls: u64,
    /// Frames processed.
    pub frames: u64,
    /// States loaded.
    pub state_loads: u64,
}

impl SeedReport {
    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &SeedReport) {
        self.instances += other.instances;
        self.activations += other.activations;
        self.process_calls += other.process_calls;
        self.frames += other.frames;
        self.state_loads += other.state_loads;
    }
}

/// Runs a seed's instance lives: one thread most of the time, two to four at once for one seed
/// in four (instances created and destroyed concurrently), each thread running `life` for one
/// to three instances in turn, each with its own generator drawn from `rng`. The first error
/// (with its thread and instance) fails the seed.
pub fn run_lives(
    rng: &mut rng::Rng,
    life: impl Fn(rng::Rng, &std::sync::Mutex<SeedReport>) -> Result<(), String> + Sync,
) -> Result<SeedReport, String> {
    use std::sync::Mutex;
    let num_threads = if rng.chance(0.25) {
        rng.range_usize(2, 4)
    } else {
        1
    };
    let lives: Vec<(rng::Rng, usize)> = (0..num_threads)
        .map(|_| {
            let life_rng = rng.fork();
            (life_rng, rng.range_usize(1, 3))
        })
        .collect();
    let report = Mutex::new(SeedReport::default());
    let errors = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for (thread_index, (mut life_rng, num_instances)) in lives.into_iter().enumerate() {
            let (life, report, errors) = (&life, &report, &errors);
            std::thread::Builder::new()
                .name(format!("fuzz-main-{thread_index}"))
                .spawn_scoped(scope, move || {
                    for instance_index in 0..num_instances {
                        if let Err(error) = life(life_rng.fork(), report) {
                            errors
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .push(format!(
                                    "thread {thread_index}, instance {instance_index}: {error}"
                                ));
                            return;
                        }
                    }
                })
                .unwrap_or_else(|e| panic!("cannot start a fuzzer thread: {e}"));
        }
    });
    let errors = errors.into_inner().unwrap_or_else(|e| e.into_inner());
    match errors.into_iter().next() {
        Some(error) => Err(error),
        None => Ok(report.into_inner().unwrap_or_else(|e| e.into_inner())),
    }
}

/// Runs seed `seed` (its format from [`Format::for_seed`]). A panic of the harness itself (not
/// of the plugin, which would abort the process) is returned as an error too.
pub fn run_seed(target: &Target, seed: u64) -> Result<(Format, SeedReport), (Format, String)> {
    let format = Format::for_seed(seed, target.vst3.is_some());
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match format {
        Format::Clap => clap_seed::run(target, seed),
        Format::Vst3 => vst3_seed::run(target, seed),
    }));
    match result {
        Ok(Ok(report)) => Ok((format, report)),
        Ok(Err(error)) => Err((format, error)),
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into());
            Err((format, format!("the fuzzer panicked: {message}")))
        }
    }
}
