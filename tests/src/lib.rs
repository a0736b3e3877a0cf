//! Shared helpers of the integration tests.

pub mod prm_source;
pub mod tsv;
