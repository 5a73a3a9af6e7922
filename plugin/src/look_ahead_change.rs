//! Applying a new Look-ahead setting: the separator is rebuilt with it off the audio thread and
//! swapped in while the host plays (its new latency reported from `process()`), or kept for the
//! next activation.

use crate::params::StemflowParams;
use crate::saved_state::StateNotice;
use crate::shared::{PluginShared, PreparedSeparator, SwapRefused};
use stemflow_engine::SeparatorChoice;

/// The plugin's background tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginTask {
    /// The Look-ahead parameter changed: rebuild the separator with it.
    ApplyLookAhead,
}

/// Rebuilds the saved separator with the current Look-ahead setting, unless the running one
/// already has it (or it is the built-in, whose latency does not depend on it). A model that
/// fails to load leaves the running separator and says why. Not realtime-safe: loads a model.
pub fn apply_look_ahead(shared: &PluginShared, params: &StemflowParams) {
    let saved = params.saved.get();
    let look_ahead = params.look_ahead.value().look_ahead();
    if saved.separator == SeparatorChoice::Builtin
        || shared.running_look_ahead() == Some(look_ahead)
    {
        return;
    }
    let separator = match saved.separator.build_with(saved.device, look_ahead) {
        Ok(separator) => separator,
        Err(error) => {
            params
                .saved
                .set_notice(StateNotice::ModelFailed(error.to_string()));
            return;
        }
    };
    match shared.swap_separator(saved.separator.clone(), saved.device, look_ahead, separator) {
        Ok(()) => {}
        Err(SwapRefused::NotActive(separator)) => {
            drop(shared.set_prepared(PreparedSeparator {
                choice: saved.separator,
                device: saved.device,
                look_ahead,
                separator,
            }));
        }
        Err(SwapRefused::Failed(error)) => {
            params.saved.set_notice(StateNotice::ModelFailed(error));
        }
    }
}
