//! Hybrid stems: one separator per stem, chained. A route (a `*.stemflow-route` JSON file in a
//! models folder, `route_file.rs`) says which separator serves which stems; the
//! [`RoutedSeparator`] runs them in order, each on what the earlier ones left: the first takes
//! its stems from the mix, the next separates the mix minus those, and so on. Other is what the
//! last one leaves, so the stems still sum to the input exactly. One latency for the whole: the
//! sum of the stages' latencies.
//!
//! First use: Spleeter's vocals with the built-in separator (or any four-stem model) splitting
//! the accompaniment into drums, bass and other. A stage can also be an ensemble of separators
//! ([`crate::ensemble`]); a route whose one stage is an ensemble is how the plugin offers one.

mod planar_delay;
mod route_file;
mod routed_separator;
mod stage_runner;

pub(crate) use planar_delay::PlanarDelay;
pub use route_file::{is_route_file, RouteFile, RouteStage, StageSeparator, ROUTE_EXTENSION};
pub use routed_separator::RoutedSeparator;
pub use stage_runner::shared_rate;
pub(crate) use stage_runner::{
    combined_file_info, combined_info, combined_result, combined_separator_methods, file_info_at,
    StageRunner,
};
