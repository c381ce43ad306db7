//! Benchmark programs for Skiff: a closed-loop HTTP load generator ([`load`]), peer processes
//! started and stopped side by side ([`peer`]), and the table that compares them ([`report`]).
//! Benchmarks print figures; they never assert on timings.

pub mod load;
pub mod peer;
pub mod report;
pub mod status;
