//! What a seed runs against ([`Target`]: the built plugins and the separators a state may name)
//! and what it reports ([`SeedReport`]).

use std::path::{Path, PathBuf};

/// The largest output magnitude a seed accepts (input is within ±1 and stem gains are at most
/// +12 dB, so anything near this is a fault, not music).
pub const MAX_OUTPUT_MAGNITUDE: f32 = 1_000.0;

/// The first sample a plugin should never output (not finite, or beyond
/// [`MAX_OUTPUT_MAGNITUDE`]), with its frame.
pub fn first_bad_sample(samples: &[f32]) -> Option<(usize, f32)> {
    samples
        .iter()
        .copied()
        .enumerate()
        .find(|(_, x)| !x.is_finite() || x.abs() > MAX_OUTPUT_MAGNITUDE)
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
        let clap = std::env::var_os(crate::artefacts::PLUGIN_PATH_ENV)
            .map(PathBuf::from)
            .ok_or_else(|| {
                format!(
                    "{} is not set (run through cargo xtask)",
                    crate::artefacts::PLUGIN_PATH_ENV
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
