//! The test kit: helpers that several test files share, each written once. `proc` reads
//! processes from `/proc` (state, liveness, memory, survivors of a run); `classify` holds
//! the `--classify` flag lists the end-to-end tests start servers with; `confirm` the
//! steps of a `--confirm-writes` exchange; `nobody` a server run as `nobody`. Test-only; everything here is a helper a test
//! calls, never a test.

pub mod classify;
pub mod confirm;
pub mod nobody;
pub mod proc;
