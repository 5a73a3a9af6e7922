//! Fault injection for tests (feature `fault-injection`, never in a release build): a separator
//! that wraps the built-in one and, on a plan, runs slower than real time, panics, fails a hop,
//! or loses its device mid-session. It is chosen like a model, from a `*.stemflow-fault` text
//! file, so hosted-plugin tests reach it through the saved state.
//!
//! The plan file holds `key=value` pairs separated by spaces or new lines:
//! `slow=<factor>` (each hop takes `factor` times its audio duration), `panic_at_hop=<n>`,
//! `error_at_hop=<n>` and `device_fails_at_hop=<n>` (hops counted from 0 since the separator
//! was made; each fault happens once, so a reset recovers), and `panic_in_activate=1`: the
//! plugin itself panics while the host activates it (a stand-in for a bug on a host-driven
//! path, for the tests of the wrapper's panic guard; see [`panic_if_planned_in_activate`]).

use std::path::Path;
use std::time::Duration;

use crate::builtin::BuiltinSeparator;
use crate::model_error::ModelError;
use crate::planar::PlanarBlock;
use crate::runtime::devices::DeviceEvent;
use crate::runtime::devices::{ActiveDevice, DeviceChoice, DeviceId};
use crate::separator::{Separator, SeparatorError, SeparatorInfo};

/// The extension of a fault plan file.
pub const FAULT_PLAN_EXTENSION: &str = "stemflow-fault";

/// What goes wrong, and when.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultPlan {
    /// Each hop takes this many times its audio duration (0: as fast as the built-in).
    pub slow_factor: f64,
    /// The hop that panics.
    pub panic_at_hop: Option<u64>,
    /// The hop that returns an error.
    pub error_at_hop: Option<u64>,
    /// The hop at which the (pretend) GPU is lost and the separator falls back to the CPU.
    pub device_fails_at_hop: Option<u64>,
    /// The plugin panics in `activate()` when this plan is its separator.
    pub panic_in_activate: bool,
}

impl FaultPlan {
    /// Parses a plan (see the module docs). Unknown keys and bad numbers are errors.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut plan = FaultPlan::default();
        for pair in text.split_whitespace() {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("`{pair}` is not key=value"))?;
            let hop = || {
                value
                    .parse::<u64>()
                    .map_err(|e| format!("{key}: `{value}`: {e}"))
            };
            match key {
                "slow" => {
                    plan.slow_factor = value
                        .parse::<f64>()
                        .ok()
                        .filter(|f| f.is_finite() && *f >= 0.0)
                        .ok_or_else(|| format!("slow: `{value}` is not a factor ≥ 0"))?
                }
                "panic_at_hop" => plan.panic_at_hop = Some(hop()?),
                "error_at_hop" => plan.error_at_hop = Some(hop()?),
                "device_fails_at_hop" => plan.device_fails_at_hop = Some(hop()?),
                "panic_in_activate" => {
                    plan.panic_in_activate = match value {
                        "1" | "true" => true,
                        "0" | "false" => false,
                        _ => return Err(format!("panic_in_activate: `{value}` is not 1 or 0")),
                    }
                }
                _ => return Err(format!("unknown fault `{key}`")),
            }
        }
        Ok(plan)
    }
}

/// Panics when `path` is a fault plan with `panic_in_activate=1`. The plugin calls this from
/// `activate()` in builds with fault injection, so the hosted tests can check that a panic on a
/// host-driven path is caught before it reaches the host (which it would abort).
pub fn panic_if_planned_in_activate(path: &Path) {
    let is_plan = path.extension().is_some_and(|e| e == FAULT_PLAN_EXTENSION);
    let plan = is_plan
        .then(|| std::fs::read_to_string(path).ok())
        .flatten()
        .and_then(|text| FaultPlan::parse(&text).ok());
    if plan.is_some_and(|plan| plan.panic_in_activate) {
        panic!("injected panic in activate ({})", path.display());
    }
}

/// The built-in separator with faults injected on a [`FaultPlan`].
pub struct FaultSeparator {
    inner: BuiltinSeparator,
    plan: FaultPlan,
    /// The built-in's, under its own name.
    info: SeparatorInfo,
    hops_done: u64,
    has_panicked: bool,
    has_failed: bool,
    device: Option<ActiveDevice>,
    pending_event: Option<DeviceEvent>,
}

impl FaultSeparator {
    /// A separator that follows `plan`. When the plan loses a device it pretends to run on
    /// `cuda:0` until then.
    pub fn new(plan: FaultPlan) -> Self {
        let device = plan.device_fails_at_hop.map(|_| ActiveDevice {
            requested: DeviceChoice::Auto,
            actual: "cuda:0".parse::<DeviceId>().expect("a valid device id"),
            fallback_reason: None,
        });
        let inner = BuiltinSeparator::new();
        Self {
            info: inner.info().clone().with_name("Fault injection"),
            inner,
            plan,
            hops_done: 0,
            has_panicked: false,
            has_failed: false,
            device,
            pending_event: None,
        }
    }

    /// Reads a plan file. Not realtime-safe: reads the disk.
    pub fn from_file(path: &Path) -> Result<Self, ModelError> {
        let text = std::fs::read_to_string(path).map_err(|e| ModelError::Unreadable {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        let plan = FaultPlan::parse(&text).map_err(|reason| ModelError::Unreadable {
            path: path.to_path_buf(),
            reason,
        })?;
        Ok(Self::new(plan))
    }
}

impl Separator for FaultSeparator {
    fn info(&self) -> &SeparatorInfo {
        &self.info
    }

    fn reset(&mut self) {
        self.inner.reset();
        self.hops_done = 0;
    }

    fn process_hop(
        &mut self,
        input: &PlanarBlock,
        stems: &mut PlanarBlock,
    ) -> Result<(), SeparatorError> {
        let hop = self.hops_done;
        self.hops_done += 1;
        if self.plan.slow_factor > 0.0 {
            let hop_s = self.info.hop_frames() as f64 / f64::from(self.info.sample_rate_hz());
            std::thread::sleep(Duration::from_secs_f64(hop_s * self.plan.slow_factor));
        }
        if self.plan.panic_at_hop == Some(hop) && !self.has_panicked {
            self.has_panicked = true;
            panic!("injected panic at hop {hop}");
        }
        if self.plan.error_at_hop == Some(hop) && !self.has_failed {
            self.has_failed = true;
            return Err(SeparatorError {
                separator: self.info.name().to_owned(),
                reason: format!("injected error at hop {hop}"),
            });
        }
        if self.plan.device_fails_at_hop == Some(hop) {
            if let Some(device) = &mut self.device {
                if device.actual != DeviceId::CPU {
                    device.actual = DeviceId::CPU;
                    device.fallback_reason = Some(format!("injected device loss at hop {hop}"));
                    self.pending_event = Some(DeviceEvent::DeviceFellBack(device.clone()));
                }
            }
        }
        self.inner.process_hop(input, stems)
    }

    fn poll_events(&mut self, events: &mut dyn FnMut(DeviceEvent)) {
        if let Some(event) = self.pending_event.take() {
            events(event);
        }
    }

    fn device(&self) -> Option<ActiveDevice> {
        self.device.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_parse_and_bad_ones_say_why() {
        assert_eq!(
            FaultPlan::parse("slow=2.5\npanic_at_hop=3 device_fails_at_hop=7").unwrap(),
            FaultPlan {
                slow_factor: 2.5,
                panic_at_hop: Some(3),
                error_at_hop: None,
                device_fails_at_hop: Some(7),
                panic_in_activate: false,
            }
        );
        assert!(
            FaultPlan::parse("panic_in_activate=1")
                .unwrap()
                .panic_in_activate
        );
        assert!(FaultPlan::parse("panic_in_activate=yes")
            .unwrap_err()
            .contains("panic_in_activate"));
        assert_eq!(FaultPlan::parse("").unwrap(), FaultPlan::default());
        assert!(FaultPlan::parse("slow=-1").unwrap_err().contains("slow"));
        assert!(FaultPlan::parse("explode=1")
            .unwrap_err()
            .contains("explode"));
        assert!(FaultPlan::parse("panic_at_hop")
            .unwrap_err()
            .contains("key=value"));
    }
}
