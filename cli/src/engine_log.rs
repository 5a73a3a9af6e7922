//! The engine's log records on the command line: its warnings (an optimised-graph cache that
//! could not be used, a device that fell back) are printed to standard error as
//! `stemflow: warning: …`, so nothing the engine notices is lost on the way to the user.
//!
//! The engine's errors are not printed by default: each of them also fails the run, and the
//! command reports that failure itself (once, in its own words). `STEMFLOW_LOG=error|warn|info|
//! debug|trace` shows every record of the engine at that level or above instead (`info`: which
//! ONNX Runtime library was loaded; `debug`: what the model loading did), `off` none.

use log::{Level, LevelFilter, Log, Metadata, Record};

use crate::output::say_err;

/// The environment variable that chooses the level.
pub const LOG_LEVEL_VAR: &str = "STEMFLOW_LOG";

/// Prints the records of Stemflow's own crates at the chosen level.
struct EngineLog {
    /// `None`: warnings only (the default).
    level: Option<LevelFilter>,
}

impl EngineLog {
    /// Whether a record of `level` from `target` is printed.
    fn is_shown(&self, level: Level, target: &str) -> bool {
        let is_ours = target.starts_with("stemflow");
        match self.level {
            None => is_ours && level == Level::Warn,
            Some(filter) => is_ours && level <= filter,
        }
    }
}

impl Log for EngineLog {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        self.is_shown(metadata.level(), metadata.target())
    }

    fn log(&self, record: &Record<'_>) {
        if !self.is_shown(record.level(), record.target()) {
            return;
        }
        let label = match record.level() {
            Level::Error => "error",
            Level::Warn => "warning",
            Level::Info => "info",
            Level::Debug => "debug",
            Level::Trace => "trace",
        };
        say_err!("stemflow: {label}: {}", record.args());
    }

    fn flush(&self) {}
}

/// The level `value` of [`LOG_LEVEL_VAR`] asks for: `None` for the default (warnings only), an
/// error for a value that is not a level.
fn parse_level(value: Option<&str>) -> Result<Option<LevelFilter>, String> {
    match value.map(str::trim) {
        None | Some("") => Ok(None),
        Some(text) => text.parse::<LevelFilter>().map(Some).map_err(|_| {
            format!("{LOG_LEVEL_VAR}={text} is not a level (off, error, warn, info, debug, trace); showing warnings")
        }),
    }
}

/// Installs the logger for this process (once; a second call changes nothing). Returns a note
/// for the user when [`LOG_LEVEL_VAR`] held something that is not a level.
pub fn install() -> Option<String> {
    let value = std::env::var(LOG_LEVEL_VAR).ok();
    let (level, note) = match parse_level(value.as_deref()) {
        Ok(level) => (level, None),
        Err(note) => (None, Some(note)),
    };
    let max = level.unwrap_or(LevelFilter::Warn);
    // (Leaked once: the logger lives as long as the process.)
    if log::set_logger(Box::leak(Box::new(EngineLog { level }))).is_ok() {
        log::set_max_level(max);
    }
    note
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_default_only_the_engines_warnings_are_shown() {
        let log = EngineLog { level: None };
        assert!(log.is_shown(Level::Warn, "stemflow_engine::runtime::build"));
        // Its errors fail the run, which the command reports itself.
        assert!(!log.is_shown(Level::Error, "stemflow_engine::stream::stats"));
        assert!(!log.is_shown(Level::Info, "stemflow_engine::runtime"));
        // Other crates' records are theirs.
        assert!(!log.is_shown(Level::Warn, "ureq::unit"));
    }

    #[test]
    fn a_chosen_level_shows_everything_of_the_engine_up_to_it() {
        let log = EngineLog {
            level: Some(LevelFilter::Info),
        };
        assert!(log.is_shown(Level::Error, "stemflow_engine::stream"));
        assert!(log.is_shown(Level::Info, "stemflow_engine::runtime"));
        assert!(!log.is_shown(Level::Debug, "stemflow_engine::runtime"));
        assert!(!log.is_shown(Level::Info, "rubato"));
        let off = EngineLog {
            level: Some(LevelFilter::Off),
        };
        assert!(!off.is_shown(Level::Error, "stemflow_engine"));
    }

    #[test]
    fn the_level_is_read_from_its_name_and_a_wrong_name_is_reported() {
        assert_eq!(parse_level(None), Ok(None));
        assert_eq!(parse_level(Some(" ")), Ok(None));
        assert_eq!(parse_level(Some("debug")), Ok(Some(LevelFilter::Debug)));
        assert_eq!(parse_level(Some("OFF")), Ok(Some(LevelFilter::Off)));
        let error = parse_level(Some("loud")).unwrap_err();
        assert!(error.contains("STEMFLOW_LOG=loud"), "{error}");
    }
}
