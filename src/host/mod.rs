//! Everything that touches the host: child processes (`exec`), discovery through the
//! target's own interpreter (`discovery`), the Python-free scan of the target's
//! distributions (`stamp`), the read-only sandbox (`sandbox`), `--allow-paths`
//! (`confine`), the target conda resolved once (`target`), the environments a write targets (`targets`, for `--write-envs`) and the
//! binding of a confirmed plan to its run (`bind`, for `--confirm-writes`). Only this layer spawns processes or reads the target's files.

pub mod audit;
pub mod bind;
pub mod confine;
pub mod discovery;
pub mod exec;
pub mod install;
pub mod sandbox;
pub mod stamp;
pub mod target;
pub mod targets;
