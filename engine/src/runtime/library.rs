//! Loading ONNX Runtime: finding the library (the order is in the module's documentation),
//! loading it once per process, and the clear message when that fails.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use stemflow_paths as paths;

/// Environment variable naming the ONNX Runtime library (or its folder).
pub const RUNTIME_LIBRARY_ENV: &str = "STEMFLOW_ORT_LIB";
/// What Stemflow needs.
pub const REQUIRED_RUNTIME: &str = "ONNX Runtime 1.24 or newer (the shared library from the \
`onnxruntime` wheel on PyPI, or `onnxruntime-gpu` for CUDA)";
/// How a user fixes a missing or broken library.
pub const FIX_HINT: &str = "run `cargo xtask fetch-runtime` in the Stemflow source folder \
(or `cargo xtask install`), or set STEMFLOW_ORT_LIB to the absolute path of libonnxruntime";
/// Key of the library path in the settings file.
pub const SETTINGS_LIBRARY_KEY: &str = "onnxruntime_library";

/// Where a candidate library path came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LibrarySource {
    /// `STEMFLOW_ORT_LIB`.
    Environment,
    /// The settings file's `onnxruntime_library`.
    Settings,
    /// The folder of the plugin bundle or executable.
    NextToBinary,
    /// The user data folder's `runtime/`.
    UserData,
}

impl std::fmt::Display for LibrarySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LibrarySource::Environment => RUNTIME_LIBRARY_ENV,
            LibrarySource::Settings => "settings file",
            LibrarySource::NextToBinary => "next to the Stemflow binary",
            LibrarySource::UserData => "user data folder",
        })
    }
}

/// A place where the library may be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibraryCandidate {
    /// Why this place is searched.
    pub source: LibrarySource,
    /// A file, or a folder to search for the library.
    pub path: PathBuf,
}

/// Why neural models are unavailable. Displayed to users as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeError {
    /// No library file was found anywhere.
    NotFound {
        /// The places searched, as "source: path".
        searched: Vec<String>,
    },
    /// Files were found but none could be loaded (wrong file, wrong architecture, too old).
    Unloadable {
        /// Each attempt: "path (source): error".
        attempts: Vec<String>,
    },
    /// The library loaded but its environment could not be created.
    Environment(String),
}

impl std::fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RuntimeError::NotFound { searched } => write!(
                f,
                "ONNX Runtime was not found (searched: {}). Neural models are disabled; the \
                 built-in separator keeps working. Needed: {REQUIRED_RUNTIME}. Fix: {FIX_HINT}.",
                if searched.is_empty() {
                    "nowhere".to_owned()
                } else {
                    searched.join("; ")
                }
            ),
            RuntimeError::Unloadable { attempts } => write!(
                f,
                "ONNX Runtime could not be loaded: {}. Neural models are disabled; the built-in \
                 separator keeps working. Needed: {REQUIRED_RUNTIME}. Fix: {FIX_HINT}.",
                attempts.join("; ")
            ),
            RuntimeError::Environment(e) => write!(
                f,
                "ONNX Runtime loaded but could not start ({e}). Neural models are disabled; the \
                 built-in separator keeps working. Fix: {FIX_HINT}."
            ),
        }
    }
}

impl std::error::Error for RuntimeError {}

/// The loaded runtime: one per process, shared by every plugin instance and the CLI.
pub struct Runtime {
    environment: ort::environment::Environment,
    library_path: PathBuf,
    source: LibrarySource,
    version: String,
}

impl Runtime {
    /// The process-wide ONNX Runtime environment.
    pub fn environment(&self) -> &ort::environment::Environment {
        &self.environment
    }

    /// The library file that was loaded.
    pub fn library_path(&self) -> &Path {
        &self.library_path
    }

    /// Where the library was found.
    pub fn source(&self) -> LibrarySource {
        self.source
    }

    /// The library's version, e.g. "1.31.0".
    pub fn version(&self) -> &str {
        &self.version
    }
}

static RUNTIME: OnceLock<Result<Runtime, RuntimeError>> = OnceLock::new();

/// The process-wide runtime, loading it on first use. Not realtime-safe: may load a library.
pub fn runtime() -> Result<&'static Runtime, &'static RuntimeError> {
    RUNTIME
        .get_or_init(|| load_runtime(&library_candidates()))
        .as_ref()
}

/// The candidate places, in resolution order. Explicit ones (environment, settings) come alone.
pub fn library_candidates() -> Vec<LibraryCandidate> {
    if let Some(path) = std::env::var_os(RUNTIME_LIBRARY_ENV).filter(|p| !p.is_empty()) {
        return vec![LibraryCandidate {
            source: LibrarySource::Environment,
            path: PathBuf::from(path),
        }];
    }
    if let Some(path) = settings_library_path() {
        return vec![LibraryCandidate {
            source: LibrarySource::Settings,
            path,
        }];
    }
    let mut candidates = Vec::new();
    if let Some(dir) = binary_dir() {
        candidates.push(LibraryCandidate {
            source: LibrarySource::NextToBinary,
            path: dir,
        });
    }
    if let Some(dir) = paths::user_runtime_dir() {
        candidates.push(LibraryCandidate {
            source: LibrarySource::UserData,
            path: dir,
        });
    }
    candidates
}

/// The library path saved in the settings file, if any.
fn settings_library_path() -> Option<PathBuf> {
    let text = std::fs::read_to_string(paths::settings_file()?).ok()?;
    let settings: serde_json::Value = serde_json::from_str(&text).ok()?;
    settings
        .get(SETTINGS_LIBRARY_KEY)?
        .as_str()
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
}

/// The folder of the binary this code is linked into (the plugin's shared library or the CLI).
fn binary_dir() -> Option<PathBuf> {
    #[cfg(unix)]
    {
        // SAFETY: `Dl_info` is a plain C struct of pointers, for which all zeroes is valid.
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: `dladdr` only reads the address of one of our own functions and fills `info`.
        let found = unsafe { libc::dladdr(binary_dir as *const libc::c_void, &mut info) };
        if found != 0 && !info.dli_fname.is_null() {
            // SAFETY: `dli_fname` is a NUL-terminated path owned by the loader.
            let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
            use std::os::unix::ffi::OsStrExt;
            let path = PathBuf::from(std::ffi::OsStr::from_bytes(name.to_bytes()));
            return std::fs::canonicalize(path)
                .ok()?
                .parent()
                .map(Path::to_path_buf);
        }
    }
    #[cfg(windows)]
    {
        use std::os::windows::ffi::OsStringExt;
        use windows_sys::Win32::System::LibraryLoader::{
            GetModuleFileNameW, GetModuleHandleExW, GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS,
            GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
        };
        let mut module = std::ptr::null_mut();
        // SAFETY: with FROM_ADDRESS the name argument is an address inside one of our own
        // functions, and UNCHANGED_REFCOUNT takes no reference that would need freeing.
        let found = unsafe {
            GetModuleHandleExW(
                GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS
                    | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                binary_dir as *const u16,
                &mut module,
            )
        };
        if found != 0 {
            // Long paths reach 32,767 UTF-16 units.
            let mut name = vec![0u16; 32_768];
            // SAFETY: `module` is our own loaded module and `name` holds `name.len()` units.
            let length = unsafe { GetModuleFileNameW(module, name.as_mut_ptr(), name.len() as u32) }
                as usize;
            if length > 0 && length < name.len() {
                let path = PathBuf::from(std::ffi::OsString::from_wide(&name[..length]));
                return path.parent().map(Path::to_path_buf);
            }
        }
    }
    std::env::current_exe()
        .ok()?
        .parent()
        .map(Path::to_path_buf)
}

/// `file` made absolute, so the loader does not resolve it against the host program's folder.
/// Windows keeps the plain form (`C:\…`): canonicalizing there gives a `\\?\` path.
fn absolute_library_path(file: PathBuf) -> PathBuf {
    #[cfg(windows)]
    let absolute = std::path::absolute(&file);
    #[cfg(not(windows))]
    let absolute = std::fs::canonicalize(&file);
    absolute.unwrap_or(file)
}

/// On Windows, loads `DirectML.dll` from the ONNX Runtime library's folder when it is there.
/// ONNX Runtime loads it by name only when the DirectML provider starts, and Windows does not
/// search the folder of a DLL loaded by path (a plugin's folder), only the host program's and
/// the system's. A module loaded once is found by name afterwards. It is never unloaded.
#[cfg(windows)]
fn preload_directml(runtime_library: &Path) {
    use std::os::windows::ffi::OsStrExt;
    use windows_sys::Win32::System::LibraryLoader::{
        LoadLibraryExW, LOAD_WITH_ALTERED_SEARCH_PATH,
    };
    let Some(directml) = runtime_library
        .parent()
        .map(|dir| dir.join("DirectML.dll"))
        .filter(|path| path.is_file())
    else {
        return;
    };
    let wide: Vec<u16> = directml
        .as_os_str()
        .encode_wide()
        .chain(std::iter::once(0))
        .collect();
    // SAFETY: `wide` is a NUL-terminated absolute path; the module stays loaded for the
    // process (ONNX Runtime may use it at any time), so its handle is deliberately not freed.
    let module = unsafe {
        LoadLibraryExW(
            wide.as_ptr(),
            std::ptr::null_mut(),
            LOAD_WITH_ALTERED_SEARCH_PATH,
        )
    };
    if module.is_null() {
        log::warn!(
            "{} is there but did not load ({}); DirectML will not be offered",
            directml.display(),
            std::io::Error::last_os_error()
        );
    }
}

/// Tries the candidates in order and keeps the first library that loads.
fn load_runtime(candidates: &[LibraryCandidate]) -> Result<Runtime, RuntimeError> {
    let mut searched = Vec::new();
    let mut attempts = Vec::new();
    for candidate in candidates {
        let file = if candidate.path.is_dir() {
            paths::find_onnxruntime_in(&candidate.path)
        } else if candidate.path.is_file() {
            Some(candidate.path.clone())
        } else {
            None
        };
        let Some(file) = file else {
            searched.push(format!(
                "{}: {}",
                candidate.source,
                candidate.path.display()
            ));
            continue;
        };
        let file = absolute_library_path(file);
        #[cfg(windows)]
        preload_directml(&file);
        match load_library(&file) {
            Ok(environment) => {
                let version = library_version(&file);
                log::info!(
                    "ONNX Runtime {version} loaded from {} ({})",
                    file.display(),
                    candidate.source
                );
                return Ok(Runtime {
                    environment,
                    library_path: file,
                    source: candidate.source,
                    version,
                });
            }
            Err(LoadFailure::Library(e)) => {
                attempts.push(format!("{} ({}): {e}", file.display(), candidate.source))
            }
            Err(LoadFailure::Environment(e)) => return Err(RuntimeError::Environment(e)),
        }
    }
    if attempts.is_empty() {
        Err(RuntimeError::NotFound { searched })
    } else {
        Err(RuntimeError::Unloadable { attempts })
    }
}

enum LoadFailure {
    Library(String),
    Environment(String),
}

fn load_library(file: &Path) -> Result<ort::environment::Environment, LoadFailure> {
    // `ort` reports problems as errors, but a panic from a broken library must not escape into a
    // plugin host either.
    let result = std::panic::catch_unwind(|| match ort::init_from(file) {
        Ok(builder) => builder
            .with_name("stemflow")
            .build()
            .map_err(|e| LoadFailure::Environment(e.to_string())),
        Err(e) => Err(LoadFailure::Library(e.to_string())),
    });
    result.unwrap_or_else(|_| {
        Err(LoadFailure::Library(
            "the library panicked while loading".into(),
        ))
    })
}

/// The loaded library's version ("1.31.0"): what its `OrtGetApiBase()->GetVersionString()`
/// says, else its build info ("git-branch=rel-1.31.0"; release wheels say `HEAD`), else its file
/// name (`libonnxruntime.so.1.31.0`; Windows names carry no version).
fn library_version(file: &Path) -> String {
    if let Some(version) = api_version_string(file) {
        return version;
    }
    let info = ort::info();
    if let Some(rest) = info.split("rel-").nth(1) {
        let version: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        if !version.is_empty() {
            return version;
        }
    }
    file.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| {
            n.split_once('.')
                .map(|(_, v)| v.trim_start_matches("so.").to_owned())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// `OrtGetApiBase()->GetVersionString()` of the library at `file`, which ort has loaded.
fn api_version_string(file: &Path) -> Option<String> {
    // SAFETY: the library ort just loaded and initialised; loading it again only takes another
    // reference (dropped below, ort keeps its own), and runs no initialiser a second time.
    let library = unsafe { libloading::Library::new(file) }.ok()?;
    type GetApiBase = unsafe extern "C" fn() -> *const ort::sys::OrtApiBase;
    // SAFETY: ONNX Runtime exports `OrtGetApiBase` with this signature; ort called it to load.
    let get_api_base = unsafe { library.get::<GetApiBase>(b"OrtGetApiBase\0") }.ok()?;
    // SAFETY: `OrtGetApiBase` takes nothing and returns a pointer to a static table.
    let base = unsafe { get_api_base() };
    if base.is_null() {
        return None;
    }
    // SAFETY: `base` points to the library's static `OrtApiBase`, whose `GetVersionString`
    // returns a static NUL-terminated string (or null).
    let version = unsafe { ((*base).GetVersionString)() };
    if version.is_null() {
        return None;
    }
    // SAFETY: non-null, NUL-terminated and static (see above).
    let version = unsafe { std::ffi::CStr::from_ptr(version) };
    version.to_str().ok().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_everywhere_is_a_clear_message() {
        let error = load_runtime(&[LibraryCandidate {
            source: LibrarySource::UserData,
            path: PathBuf::from("/nonexistent/stemflow/runtime"),
        }])
        .err()
        .unwrap();
        let message = error.to_string();
        assert!(matches!(error, RuntimeError::NotFound { .. }));
        assert!(
            message.contains("/nonexistent/stemflow/runtime"),
            "{message}"
        );
        assert!(message.contains("1.24 or newer"), "{message}");
        assert!(message.contains("cargo xtask fetch-runtime"), "{message}");
        assert!(
            message.contains("built-in separator keeps working"),
            "{message}"
        );
    }

    #[test]
    fn a_garbage_file_is_unloadable_not_a_panic() {
        let path = std::env::temp_dir().join(format!("stemflow-garbage-{}.so", std::process::id()));
        std::fs::write(&path, b"this is not a shared library").unwrap();
        let error = load_runtime(&[LibraryCandidate {
            source: LibrarySource::Environment,
            path: path.clone(),
        }])
        .err()
        .unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(matches!(error, RuntimeError::Unloadable { .. }), "{error}");
        let message = error.to_string();
        assert!(message.contains(&path.display().to_string()), "{message}");
        assert!(message.contains(RUNTIME_LIBRARY_ENV), "{message}");
    }
}
