//! The target stamp: conda's version and its `conda` entry points, digested. A baked
//! snapshot records the stamp of the conda it was captured from; `host::stamp` computes a
//! target's stamp from its files.

use serde::{Deserialize, Serialize};

/// conda's version and its entry points, digested.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    pub conda_version: String,
    /// SHA-256 of the canonical JSON of the version and the sorted entry points.
    pub digest: String,
}
