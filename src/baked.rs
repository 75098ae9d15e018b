//! Typed compilers baked in from `snapshots/` by `build.rs`, and matching them to live
//! commands by signature digest.

use serde_json::{Map, Value};

use crate::schema::Invalid;

/// A compiler: validated input → argv.
pub type CompileFn = fn(&Map<String, Value>) -> Result<Vec<String>, Invalid>;

/// One command of a baked snapshot.
#[derive(Debug)]
pub struct BakedCommand {
    /// Canonical command path.
    pub path: &'static [&'static str],
    /// Digest of everything in the command's branch that shapes its schema and argv.
    pub signature: &'static str,
    /// The typed argv compiler (deserializes into the generated input struct).
    pub compile: CompileFn,
}
