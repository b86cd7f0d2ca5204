//! Text rendering of what the commands show. Pure functions from values to strings, so every
//! layout is tested without a cluster.

pub mod age;
pub mod columns;
pub mod header;
pub mod style;
pub mod tree;
