//! The syntax of a selection (`--tools`, `CCM_TOOLS`): names, globs and groups, checked
//! when the command line is parsed. Pure.

use super::{GROUPS, Group};

/// One item of a selection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// A canonical tool name.
    Name(String),
    /// A glob over canonical tool names.
    Glob(glob::Pattern),
    Group(Group),
    /// `@plugin:NAME`, the distribution name as given.
    Plugin(String),
}

/// The operator's selection, syntax-checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    pub items: Vec<Item>,
}

/// Why a selection's text is not a selection (the operator's text, clipped and escaped).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectionError {
    #[error("give at least one tool name, glob or group ({GROUPS})")]
    Empty,
    #[error("'{0}' is not a tool name, a glob or a group (groups: {GROUPS})")]
    Syntax(String),
    #[error("unknown group '{0}' (groups: {GROUPS})")]
    UnknownGroup(String),
}

/// The operator's text, as messages repeat it: at most 64 characters, escaped.
pub(super) fn clip(text: &str) -> String {
    text.chars()
        .take(64)
        .collect::<String>()
        .escape_default()
        .to_string()
}

impl Selection {
    /// Parse comma-separated items (each trimmed; empty items are skipped).
    pub fn parse<'a>(
        entries: impl IntoIterator<Item = &'a str>,
    ) -> Result<Selection, SelectionError> {
        let mut items = Vec::new();
        for text in entries
            .into_iter()
            .flat_map(|e| e.split(','))
            .map(str::trim)
            .filter(|t| !t.is_empty())
        {
            items.push(Item::parse(text)?);
        }
        if items.is_empty() {
            return Err(SelectionError::Empty);
        }
        Ok(Selection { items })
    }

    /// The selection as text (for the capabilities document).
    pub fn texts(&self) -> Vec<String> {
        self.items.iter().map(Item::text).collect()
    }
}

impl Item {
    fn parse(text: &str) -> Result<Item, SelectionError> {
        if let Some(group) = text.strip_prefix('@') {
            return Ok(match group {
                "core" => Item::Group(Group::Core),
                "read" => Item::Group(Group::Read),
                "envs" => Item::Group(Group::Envs),
                "packages" => Item::Group(Group::Packages),
                "config" => Item::Group(Group::Config),
                "all" => Item::Group(Group::All),
                _ => match group.strip_prefix("plugin:") {
                    Some(name)
                        if !name.is_empty()
                            && name
                                .chars()
                                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) =>
                    {
                        Item::Plugin(name.to_owned())
                    }
                    Some(_) => return Err(SelectionError::Syntax(clip(text))),
                    None => return Err(SelectionError::UnknownGroup(clip(text))),
                },
            });
        }
        let name_char = |c: char| c.is_ascii_alphanumeric() || "_-".contains(c);
        if text.chars().all(name_char) {
            return Ok(Item::Name(text.to_owned()));
        }
        if text.chars().all(|c| name_char(c) || "*?[]!".contains(c))
            && let Ok(pattern) = glob::Pattern::new(text)
        {
            return Ok(Item::Glob(pattern));
        }
        Err(SelectionError::Syntax(clip(text)))
    }

    pub(super) fn text(&self) -> String {
        match self {
            Item::Name(name) => name.clone(),
            Item::Glob(pattern) => pattern.as_str().to_owned(),
            Item::Group(group) => format!("@{}", group.name()),
            Item::Plugin(name) => format!("@plugin:{name}"),
        }
    }
}
