//! Shared helpers of the integration tests.

pub mod e2e;
pub mod prm_source;
pub mod scenarios;
pub mod tsv;
