//! Stemflow's model core. Placeholder, filled in by the main engine work.
pub mod demo_song;
pub mod metrics;
