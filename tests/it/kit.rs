//! The test kit: helpers that several test files share, each written once. `proc` reads
//! processes from `/proc` (state, liveness, memory, survivors of a run); `cuda` skips
//! conda's CUDA probe where a claim does not involve it; `classify` holds
//! the `--classify` flag lists the end-to-end tests start servers with; `confirm` the
//! steps of a `--confirm-writes` exchange; `exit` a server that must stop on its own;
//! `fifo` a FIFO a test reads without blocking; `nobody` a server run as `nobody` (or,
//! whoever runs the tests, not as root); `prefix`
//! a private copy of a conda prefix; `users` who a sandbox check runs as, each with a
//! fresh HOME; `tree` the names below a directory. Test-only; everything here is a
//! helper a test calls, never a test.

pub(crate) mod classify;
pub(crate) mod confirm;
pub(crate) mod cuda;
pub(crate) mod exit;
pub(crate) mod fifo;
pub(crate) mod nobody;
pub(crate) mod prefix;
pub(crate) mod proc;
pub(crate) mod tree;
pub(crate) mod users;
