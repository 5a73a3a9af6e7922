//! [`SeparatorSlot`]: the run's separator (or an ensemble's), built on first use and handed
//! from input to input, so a model is loaded (and its device reported) once per run, not once
//! per file.

use stemflow_engine::runtime::{DeviceChoice, DeviceId};
use stemflow_engine::whole_file::WholeFileSeparator;
use stemflow_engine::LookAhead;

use super::options::{Failure, SeparateOptions};

/// Holds the separator between inputs.
pub(super) struct SeparatorSlot<'a> {
    options: &'a SeparateOptions,
    separator: Option<WholeFileSeparator>,
    has_reported: bool,
    /// A shortened look-ahead's cost, said once the first stream tells its latency:
    /// (how many times as often the model runs, the measured real-time factor).
    look_ahead_cost: Option<(f64, Option<f64>)>,
}

impl<'a> SeparatorSlot<'a> {
    pub fn new(options: &'a SeparateOptions) -> Self {
        Self {
            options,
            separator: None,
            has_reported: false,
            look_ahead_cost: None,
        }
    }

    /// The separator for the next input: the one the last input gave back, or a new one. A
    /// failure to build it would repeat for every input, so it is fatal.
    pub fn take(&mut self) -> Result<WholeFileSeparator, Failure> {
        if let Some(separator) = self.separator.take() {
            return Ok(separator);
        }
        let options = self.options;
        let separator = WholeFileSeparator::load(&options.model, &options.file_options())
            .map_err(|e| Failure::Fatal(e.to_string()))?;
        let is_first = !self.has_reported;
        self.has_reported = true;
        match separator.device() {
            Some(active) => {
                if let Some(reason) = &active.fallback_reason {
                    if options.is_strict_device {
                        return Err(Failure::Fatal(format!(
                            "device {} cannot run the model ({reason}); --strict-device forbids the fallback",
                            active.requested.id()
                        )));
                    }
                    if is_first {
                        crate::output::say_err!("stemflow: warning: {reason}");
                    }
                }
                if is_first && separator.info().is_float16() && active.actual == DeviceId::CPU {
                    crate::output::say_err!(
                        "stemflow: warning: {} is a float16 model, made for GPUs: on the CPU it runs slower than its float32 original",
                        separator.name()
                    );
                }
                if is_first && !options.is_quiet() {
                    crate::output::say!(
                        "Running {} on {} ({})",
                        separator.name(),
                        active.actual,
                        separator.describe_mode()
                    );
                    if options.look_ahead != LookAhead::Full {
                        self.look_ahead_cost = Some((
                            separator.info().compute_factor(),
                            separator.info().predicted_real_time_factor(),
                        ));
                    }
                }
            }
            None if options.device != DeviceChoice::Auto
                && options.device != DeviceChoice::Device(DeviceId::CPU) =>
            {
                let message = format!(
                    "the built-in separator runs on the CPU, not on {}",
                    options.device.id()
                );
                if options.is_strict_device {
                    return Err(Failure::Fatal(message));
                }
                if is_first {
                    crate::output::say_err!("stemflow: warning: {message}");
                }
            }
            None => {}
        }
        Ok(separator)
    }

    /// Says what a shortened look-ahead costs, once per run, when the first input's stream
    /// reports its latency (`latency_s`: what the plugin reports at this rate).
    pub fn report_look_ahead(&mut self, latency_s: f64) {
        let Some((compute_factor, predicted_rtf)) = self.look_ahead_cost.take() else {
            return;
        };
        crate::output::say!(
            "Look-ahead {}: latency {:.0} ms, the model runs {compute_factor:.1}× as often as at Full",
            self.options.look_ahead,
            latency_s * 1000.0
        );
        if let Some(rtf) = predicted_rtf {
            crate::output::say!(
                "  measured: {rtf:.2} s of model time per second of audio ({})",
                if rtf < 1.0 {
                    "the plugin keeps up in real time on this device"
                } else {
                    "too heavy for real-time playback on this device"
                }
            );
        }
    }

    /// The run's options with the stems its separator delivers (built now if it is not yet).
    pub fn resolve_stems(&mut self) -> Result<SeparateOptions, Failure> {
        let separator = self.take()?;
        let resolved = self.options.for_model(&separator);
        self.put_back(separator);
        resolved.map_err(Failure::Fatal)
    }

    /// Keeps the separator an input is done with (reset) for the next one.
    pub fn put_back(&mut self, separator: WholeFileSeparator) {
        self.separator = Some(separator);
    }
}
