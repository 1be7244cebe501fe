//! The one integration-test binary: every tool driven as a user drives it, as a process.

mod binaries;
mod docs;
mod etcd;
mod examples;
mod feedback;
mod gate;
mod hardening_lock;
mod locations;
mod lock;
mod recap;
mod support;
