//! The one integration-test binary: every tool driven as a user drives it, as a process.

mod attack16;
mod binaries;
mod contract_feedback;
mod contract_model_tools;
mod crash;
mod docs;
mod dream;
mod dream_attacks;
mod etcd;
mod examples;
mod feedback;
mod gate;
mod hardening_files;
mod hardening_lock;
mod hardening_net;
mod locations;
mod lock;
mod net;
mod recap;
mod review;
mod status;
mod suggest;
mod support;
