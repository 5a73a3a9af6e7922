//! Empty on purpose: the dependencies in this crate's `Cargo.toml` give the CLI and the plugin,
//! which both depend on it, one feature set for every crate they share, so building one after
//! the other reuses everything.
