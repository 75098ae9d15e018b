//! Folding: which tools are one command registered under two names (see the parent
//! module). Pure.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::model::catalog::{Catalog, Command};

/// Folded tool → listed tool, for sibling commands whose subtrees have the same shape.
pub(super) fn folds(
    catalog: &Catalog,
    by_path: &HashMap<&[String], &str>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Some(root) = &catalog.root {
        fold_level(root, &mut Vec::new(), by_path, &mut out);
    }
    out
}

fn fold_level(
    node: &Command,
    path: &mut Vec<String>,
    by_path: &HashMap<&[String], &str>,
    out: &mut BTreeMap<String, String>,
) {
    let children: Vec<(&Command, &String)> = node
        .children
        .iter()
        .filter_map(|c| Some((c, c.name.as_ref()?)))
        .collect();
    let shapes: Vec<Option<Command>> = children.iter().map(|(c, _)| anonymous(c)).collect();
    let mut folded_here: HashSet<usize> = HashSet::new();
    for i in 0..children.len() {
        if shapes[i].is_none() {
            continue;
        }
        let twins: Vec<usize> = (0..children.len())
            .filter(|j| shapes[*j] == shapes[i])
            .collect();
        if twins.len() < 2 || twins[0] != i {
            continue;
        }
        // The longer name is listed; equal lengths: the one that sorts first.
        let keep = *twins
            .iter()
            .min_by_key(|j| (std::cmp::Reverse(children[**j].1.len()), children[**j].1))
            .expect("two twins");
        let tools_under = |at: usize| -> Vec<(Vec<String>, String)> {
            let mut prefix = path.clone();
            prefix.push(children[at].1.clone());
            by_path
                .iter()
                .filter(|(p, _)| p.starts_with(&prefix))
                .map(|(p, name)| (p[prefix.len()..].to_vec(), (*name).to_owned()))
                .collect()
        };
        let kept: HashMap<Vec<String>, String> = tools_under(keep).into_iter().collect();
        for &other in twins.iter().filter(|j| **j != keep) {
            folded_here.insert(other);
            for (relative, alias) in tools_under(other) {
                if let Some(listed) = kept.get(&relative) {
                    out.insert(alias, listed.clone());
                }
            }
        }
    }
    for (i, (child, name)) in children.iter().enumerate() {
        if !folded_here.contains(&i) {
            path.push((*name).clone());
            fold_level(child, path, by_path, out);
            path.pop();
        }
    }
}

/// A command group without what only names or describes it as a whole (name, aliases,
/// one-line help, long description); `None` for a terminal command. Two groups that are
/// equal this way (every argument and descendant, help texts included) are one group
/// registered under two names. Terminal commands never fold: equal arguments are common
/// among different commands (conda's `env config vars set` and `unset`, `commands` and
/// `deactivate`; conda-workspaces' `platform add` and `remove`).
fn anonymous(command: &Command) -> Option<Command> {
    (!command.children.is_empty()).then(|| Command {
        aliases: Vec::new(),
        help: None,
        name: None,
        summary: None,
        ..command.clone()
    })
}
