#![no_std]
// Intentionally empty: see Cargo.toml.
