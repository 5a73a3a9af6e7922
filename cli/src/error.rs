//! [`CliError`]: how a subcommand failed, and so the exit code.

/// How a subcommand failed.
#[derive(Debug)]
pub enum CliError {
    /// The arguments do not make sense together: exit 2 with clap's usage.
    Usage(String),
    /// Something failed (an unknown model, an input): exit 1 with the message.
    Failed(String),
    /// Failures were already reported (one line per failed input): exit 1 quietly.
    Reported,
    /// SIGINT or SIGTERM stopped the run after cleaning up: exit 128 + the signal.
    Interrupted(i32),
    /// SIGINT or SIGTERM stopped the run; `note` says what was kept or removed: exit 128 + the
    /// signal.
    InterruptedWith {
        /// The signal.
        signal: i32,
        /// What became of the unfinished work.
        note: String,
    },
}

impl From<String> for CliError {
    fn from(message: String) -> Self {
        CliError::Failed(message)
    }
}
