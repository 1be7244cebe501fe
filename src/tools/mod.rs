//! One module per binary, named after it. Tools never import each other: what two of them
//! share (the envelope, the lock and the outcome a run hands its release) lives in `cli` or
//! `lock`.

pub mod dream_gate;
pub mod dream_lock;
pub mod dream_run;
pub mod feedback;
#[cfg(test)]
mod props;
pub mod recap;
pub mod suggest;
pub mod turn_status;
