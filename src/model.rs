//! The data model: the catalog discovery produces, the snapshot form it is baked in, and
//! the target stamp that says whether a snapshot matches. Pure: no I/O, no environment.

pub mod catalog;
pub mod snapshot;
pub mod stamp;
