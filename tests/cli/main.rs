//! The one integration-test binary: every tool driven as a user drives it, as a process.

// Tests and benchmarks drive processes through libc (signals, FIFOs, rlimits) and name
// helpers `pub` for their sibling modules.
#![allow(unsafe_code, unreachable_pub)]

mod attack16;
mod attack21;
mod attack26;
mod binaries;
mod check;
mod claude_code;
mod claude_formats;
mod contract_feedback;
mod contract_model_tools;
mod contract_pipeline;
mod crash;
mod docs;
mod dream;
mod dream_attacks;
mod dream_stamps;
mod etcd;
mod eval;
mod examples;
mod feedback;
mod gate;
mod hardening_files;
mod hardening_lock;
mod hardening_net;
mod local_models;
mod locations;
mod lock;
mod net;
mod provenance;
mod provider_claude;
mod recap;
mod relay;
mod review;
mod rules;
mod schemas;
mod status;
mod structure;
mod suggest;
mod support;
mod terminal_text;
