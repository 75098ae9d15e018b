//! Typed compilers baked in from `snapshots/` by `build.rs`, and matching them to live
//! commands by signature digest.
//!
//! `cargo run -p codegen` renders, per snapshot, one typed input struct per command with
//! an argv method built on the same primitives as the generic interpreter
//! ([`crate::tools::argv`]). `build.rs` includes every rendered file (a registry of snapshots and
//! their commands); with the `baked` feature off (the codegen crate builds that way) the
//! registry is empty. The fixture conda's snapshot and the commands' schema sources are
//! baked only with the `test-snapshots` feature (the test builds). At runtime a live
//! command uses a baked compiler only when its signature digest equals the baked one.

use crate::model::catalog::{Catalog, Plugin};
use crate::tools::toolset::{Compiler, Toolset, ToolsetSettings};

pub use crate::tools::toolset::{BakedCommand, CompileFn};

/// One baked snapshot.
#[derive(Debug)]
pub struct BakedSnapshot {
    /// The snapshot file, e.g. `conda-26.7.json`.
    pub file: &'static str,
    pub conda_version: &'static str,
    pub fingerprint: &'static str,
    /// The target stamp digest of the captured conda, if recorded.
    pub stamp: Option<&'static str>,
    /// The snapshot itself (normalized discovery).
    pub json: &'static str,
    pub commands: &'static [BakedCommand],
}

/// The toolset of `catalog`, using a baked typed compiler wherever a baked command has
/// the live command's path and signature digest.
pub fn toolset(catalog: &Catalog, plugins: &[Plugin], settings: &ToolsetSettings) -> Toolset {
    Toolset::build_with(catalog, plugins, settings, |path, branch| {
        let signature = crate::model::snapshot::signature(branch);
        match find(path, &signature, &catalog.conda_version) {
            Some((_, command)) => Compiler::Baked(command),
            None => Compiler::Generic,
        }
    })
}

#[cfg(feature = "baked")]
mod registry {
    use super::BakedSnapshot;
    include!(concat!(env!("OUT_DIR"), "/baked_registry.rs"));
}

/// Every baked snapshot (none without the `baked` feature).
pub fn snapshots() -> &'static [BakedSnapshot] {
    #[cfg(feature = "baked")]
    {
        registry::SNAPSHOTS
    }
    #[cfg(not(feature = "baked"))]
    {
        &[]
    }
}

/// The baked compiler for a live command, if one has the same path and signature.
/// Snapshots of the live conda version are preferred.
pub fn find(
    path: &[String],
    signature: &str,
    conda_version: &str,
) -> Option<(&'static BakedSnapshot, &'static BakedCommand)> {
    let mut snapshots: Vec<&'static BakedSnapshot> = snapshots().iter().collect();
    snapshots.sort_by_key(|s| s.conda_version != conda_version);
    snapshots.into_iter().find_map(|snapshot| {
        snapshot
            .commands
            .iter()
            .find(|c| c.signature == signature && c.path.iter().eq(path.iter()))
            .map(|command| (snapshot, command))
    })
}

/// Support for the generated code (only it uses this, so only with the `baked` feature).
#[cfg(feature = "baked")]
pub(crate) mod rt {
    use serde::de::DeserializeOwned;
    use serde::{Deserialize, Deserializer};
    use serde_json::{Map, Number, Value};

    use crate::tools::argv::{self, Occurrence};
    use crate::tools::error::{Invalid, Keyword};
    use crate::tools::layout;

    /// An integer value as its argv text (`2.0` is accepted and written `2`).
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub(crate) struct Int(pub String);

    /// A number value as its argv text.
    #[derive(Clone, Debug, PartialEq, Eq)]
    #[allow(
        dead_code,
        reason = "for the compilers of catalogs with a number option; the baked one has none"
    )]
    pub(crate) struct Num(pub String);

    impl<'de> Deserialize<'de> for Int {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let n = Number::deserialize(d)?;
            argv::integer_text(&n)
                .map(Int)
                .ok_or_else(|| serde::de::Error::custom("expected an integer"))
        }
    }

    impl<'de> Deserialize<'de> for Num {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let n = Number::deserialize(d)?;
            argv::number_text(&n)
                .map(Num)
                .ok_or_else(|| serde::de::Error::custom("expected a finite number"))
        }
    }

    /// A value's argv text.
    pub(crate) trait Text {
        fn text(&self) -> String;
    }

    impl Text for String {
        fn text(&self) -> String {
            self.clone()
        }
    }

    impl Text for Int {
        fn text(&self) -> String {
            self.0.clone()
        }
    }

    impl Text for Num {
        fn text(&self) -> String {
            self.0.clone()
        }
    }

    /// Texts of a list.
    pub(crate) fn texts<T: Text>(values: &[T]) -> Vec<String> {
        values.iter().map(Text::text).collect()
    }

    /// `Some(None)` for an explicit null, `None` (via `#[serde(default)]`) when absent.
    #[allow(
        dead_code,
        reason = "for the compilers of catalogs with a nullable option; the baked one has none"
    )]
    pub(crate) fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
    where
        D: Deserializer<'de>,
        T: Deserialize<'de>,
    {
        Option::<T>::deserialize(d).map(Some)
    }

    /// The flag when `on`.
    pub(crate) fn when(on: bool, flag: &str) -> Vec<Occurrence> {
        if on {
            vec![argv::flag(flag)]
        } else {
            Vec::new()
        }
    }

    /// A flag repeated `count` times (count and append_const actions).
    pub(crate) fn repeat(flag: &str, count: &Int, path: &str) -> Result<Vec<Occurrence>, Invalid> {
        let n: u64 = count
            .0
            .parse()
            .map_err(|_| Invalid::at(path, Keyword::Type))?;
        if n > crate::tools::schema::MAX_REPEAT {
            return Err(Invalid::at(path, Keyword::Maximum));
        }
        Ok(vec![argv::flag(flag); n as usize])
    }

    /// A `nargs='?'` option occurrence: bare for null, attached value otherwise.
    pub(crate) fn optional<T: Text>(
        flag: &str,
        value: &Option<T>,
        path: &str,
    ) -> Result<Occurrence, Invalid> {
        match value {
            None => Ok(argv::bare(flag)),
            Some(v) => argv::single(flag, v.text(), path),
        }
    }

    /// One `flag value` occurrence per item of a repeatable option (append or extend with
    /// nargs 1), an item's error at `<path>[i]`.
    pub(crate) fn singles<T: Text>(
        flag: &str,
        values: &[T],
        path: &str,
    ) -> Result<Vec<Occurrence>, Invalid> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| argv::single(flag, v.text(), &format!("{path}[{i}]")))
            .collect()
    }

    /// One [`optional`] occurrence per item of a repeatable `nargs='?'` option, an item's
    /// error at `<path>[i]`.
    #[allow(
        dead_code,
        reason = "codegen emits it for an append or extend option with nargs '?'; no baked snapshot has one today"
    )]
    pub(crate) fn optionals<T: Text>(
        flag: &str,
        values: &[Option<T>],
        path: &str,
    ) -> Result<Vec<Occurrence>, Invalid> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| optional(flag, v, &format!("{path}[{i}]")))
            .collect()
    }

    /// Deserialize into the generated struct and run its argv method.
    pub(crate) fn compile_with<T: DeserializeOwned>(
        input: &Map<String, Value>,
        argv: fn(&T) -> Result<Vec<String>, Invalid>,
    ) -> Result<Vec<String>, Invalid> {
        // ccm's own per-call properties are not conda arguments.
        let conda: Map<String, Value> = input
            .iter()
            .filter(|(key, _)| !layout::is_reserved(key))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        let typed: T = serde_json::from_value(Value::Object(conda))
            .map_err(|_| Invalid::at("$", Keyword::Type))?;
        argv(&typed)
    }
}
