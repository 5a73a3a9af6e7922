//! Nothing to build: the build-dependencies only unify features (see Cargo.toml).

fn main() {}
