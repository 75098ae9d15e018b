//! The policy-shaped listing: each generated tool as the active policy admits it. A tool
//! whose every call the policy refuses is withheld from `tools/list` (still routed, so a
//! call gets the policy's refusal); a tool the policy admits only in some forms
//! ([`policy::ListedForm::Restricted`]: dry runs only, options left out, one of some options
//! required, plain package specs) is listed with that restricted schema, read-only
//! annotations and one sentence saying what else needs which grant. Calls of a restricted
//! tool are validated against the schema the session was shown ([`Shown::validate`]);
//! the policy on the final argv stays the only gate.
//!
//! One form per option: an option a tool takes in more than one form — before and after
//! the command name (conda's `-v`, a plugin group's `-n` before its subcommand), or under
//! a deprecated spelling next to its replacement (`--env-spec` beside `--format`) — is
//! listed once ([`other_forms`]): in its per-command form, not deprecated. The other
//! forms stay callable (a full tool's calls are validated against its full schema) and
//! `--list-all`, which skips this module, lists them. Pure; no I/O.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use serde_json::{Value, json};

use crate::model::catalog::ActionKind;
use crate::tools::layout::{self, Layout, Property};
use crate::tools::policy::{self, Grants, ListedForm, PLAIN_SPEC, Restriction};
use crate::tools::schema::{self, Invalid, LazyValidator};
use crate::tools::toolset::{Tool, Toolset, WRITE_SENTENCE};

/// The restricted form of one listed tool.
#[derive(Debug)]
pub struct Shown {
    /// The listed input schema without ccm's own `ccm_*` properties (validated apart, as
    /// for every generated tool), before the operator's cosmetic parameter hiding.
    pub schema: Value,
    /// What is offered and what else needs which grant (also in the description).
    pub sentence: String,
    /// Why options the form leaves out need a grant here although the read-only sandbox
    /// would admit them (for errors; `None` when nothing is left out for that reason).
    pub why: Option<String>,
    validator: LazyValidator,
}

impl Shown {
    /// Check a call against the schema the session was shown.
    pub fn validate(&self, input: &Value) -> Result<(), Invalid> {
        self.validator.validate(input, || self.schema.clone())
    }
}

/// What the listing withholds and restricts.
#[derive(Debug, Default)]
pub struct Shaped {
    /// Canonical names of tools no call of which the policy admits: not listed.
    pub withheld: HashSet<String>,
    /// Canonical name → the restricted form it is listed with.
    pub restricted: HashMap<String, Shown>,
}

/// Shape every generated tool's descriptor (in place) for the operator's grants.
pub fn shape(toolset: &mut Toolset, grants: Grants) -> Shaped {
    let mut shaped = Shaped::default();
    let timeout = toolset.timeout();
    for tool in &mut toolset.generated {
        let forms = other_forms(&tool.layout);
        match policy::listed_form(&toolset.rules, &tool.path, tool.opaque, grants) {
            ListedForm::Full => {
                if !forms.is_empty() {
                    one_form_each(&mut tool.descriptor, &tool.layout, &forms, timeout);
                }
            }
            ListedForm::Refused => {
                shaped.withheld.insert(tool.name.clone());
            }
            ListedForm::Restricted(restriction) => match restricted(tool, &restriction, &forms) {
                Some(shown) => {
                    restrict_descriptor(&mut tool.descriptor, &shown, timeout);
                    shaped.restricted.insert(tool.name.clone(), shown);
                }
                None => {
                    shaped.withheld.insert(tool.name.clone());
                }
            },
        }
    }
    shaped
}

/// The ids of the properties a listing leaves out because the option they set is listed
/// in another form. Two exposed optional options are forms of one option when they set
/// the same destination with the same action, constant, arity, type and choices, and
/// either have the same flags (the root's `-v` and the command's) or one of them is
/// deprecated (`--env-spec` beside `--format`); options that differ only in a constant
/// conda does not report (`--update-deps` and `--update-all`) are not forms of one. Of
/// each set of forms the deepest level's is listed (the per-command form), within a level
/// the first one conda does not call deprecated. Required arguments and positionals are
/// never left out.
pub fn other_forms(layout: &Layout) -> Vec<String> {
    let optional = |p: &&Property| !p.argument.required && !p.argument.is_positional();
    let candidates: Vec<&Property> = layout.properties.iter().filter(optional).collect();
    let mut omitted = Vec::new();
    for property in &candidates {
        let same: Vec<&&Property> = candidates
            .iter()
            .filter(|other| same_option(other, property))
            .collect();
        let listed = same
            .iter()
            .max_by_key(|p| {
                (
                    p.level,
                    !schema::is_deprecated(&p.argument),
                    std::cmp::Reverse(layout.properties.iter().position(|q| q.id == p.id)),
                )
            })
            .map(|p| p.id.as_str());
        if listed != Some(property.id.as_str()) {
            omitted.push(property.id.clone());
        }
    }
    omitted
}

/// Whether two properties are forms of one option (see [`other_forms`]).
fn same_option(a: &Property, b: &Property) -> bool {
    let (x, y) = (&a.argument, &b.argument);
    let setting = x.dest == y.dest
        && x.action == y.action
        && x.const_value == y.const_value
        && x.nargs == y.nargs
        && x.value_type == y.value_type
        && x.choices == y.choices;
    setting
        && (x.flags == y.flags
            || a.id == b.id
            || schema::is_deprecated(x)
            || schema::is_deprecated(y))
}

/// The layout without the properties `omitted` (and their places in exclusive groups).
fn without(layout: &Layout, omitted: &[String]) -> Layout {
    let mut narrowed = layout.clone();
    narrowed.properties.retain(|p| !omitted.contains(&p.id));
    for level in &mut narrowed.levels {
        for group in &mut level.groups {
            group.members.retain(|m| !omitted.contains(m));
        }
    }
    narrowed
}

/// A full tool's listed schema with one form per option.
fn one_form_each(descriptor: &mut Value, layout: &Layout, forms: &[String], timeout: Duration) {
    let Ok(mut input) = schema::input_schema(&without(layout, forms)) else {
        return;
    };
    layout::add_reserved(&mut input, timeout);
    descriptor["inputSchema"] = Value::Object(input);
}

/// The restricted schema of a tool (with one form per option: `forms` are left out
/// without a word); `None` when its layout cannot state the form (no dry-run property, a
/// required group left empty): the tool is then withheld.
pub fn restricted(tool: &Tool, restriction: &Restriction, forms: &[String]) -> Option<Shown> {
    let layout = &tool.layout;
    let has_flag =
        |p: &Property, flags: &[&str]| p.argument.flags.iter().any(|f| flags.contains(&f.as_str()));
    let omitted: Vec<String> = layout
        .properties
        .iter()
        .filter(|p| has_flag(p, &restriction.without))
        .map(|p| p.id.clone())
        .collect();
    let mut left_out = omitted.clone();
    left_out.extend(forms.iter().cloned());
    let narrowed = without(layout, &left_out);
    let mut input = schema::input_schema(&narrowed).ok()?;
    if restriction.dry_run {
        let id = &find(&narrowed, &["--dry-run"])?.id;
        input["properties"][id]["const"] = json!(true);
        let required = input.entry("required").or_insert_with(|| json!([]));
        required.as_array_mut()?.push(json!(id));
    }
    let mut one_of = Vec::new();
    if !restriction.one_of.is_empty() {
        let mut alternatives = Vec::new();
        for (flag, with_values) in &restriction.one_of {
            if let Some(property) = find(&narrowed, &[flag]) {
                alternatives.push(present(property, *with_values));
                one_of.push(property.id.clone());
            }
        }
        if alternatives.is_empty() {
            return None;
        }
        let all = input.entry("allOf").or_insert_with(|| json!([]));
        all.as_array_mut()?.push(json!({"anyOf": alternatives}));
    }
    if restriction.plain_specs {
        let terminal = narrowed.levels.len().saturating_sub(1);
        for property in &narrowed.properties {
            if property.level == terminal && property.argument.is_positional() {
                plain_patterns(&mut input["properties"][&property.id]);
            }
        }
    }
    let sentence = restriction.sentence(&omitted, &one_of);
    Some(Shown {
        schema: Value::Object(input),
        sentence,
        why: restriction
            .unsandboxed
            .then(|| policy::UNSANDBOXED.to_owned()),
        validator: LazyValidator::default(),
    })
}

/// The property one of `flags` belongs to.
fn find<'a>(layout: &'a Layout, flags: &[&str]) -> Option<&'a Property> {
    layout
        .properties
        .iter()
        .find(|p| p.argument.flags.iter().any(|f| flags.contains(&f.as_str())))
}

/// The condition under which argparse sees the option (with a value when asked).
fn present(property: &Property, with_values: bool) -> Value {
    let id = &property.id;
    match property.argument.action {
        ActionKind::StoreTrue | ActionKind::StoreConst => {
            json!({"required": [id], "properties": {id: {"const": true}}})
        }
        _ if with_values => json!({"required": [id], "properties": {id: {"minItems": 1}}}),
        _ => json!({"required": [id]}),
    }
}

/// Every string pattern in a positional's schema becomes the plain-spec pattern (which
/// also refuses option-like values).
fn plain_patterns(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if map.get("type") == Some(&json!("string")) {
                map.insert("pattern".into(), json!(PLAIN_SPEC));
            }
            for value in map.values_mut() {
                plain_patterns(value);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(plain_patterns),
        _ => {}
    }
}

/// The listed descriptor of a restricted tool: its schema, one more sentence, and the
/// annotations of what it now admits (read-only calls only).
fn restrict_descriptor(descriptor: &mut Value, shown: &Shown, timeout: Duration) {
    let Some(map) = descriptor.as_object_mut() else {
        return;
    };
    let mut listed = shown.schema.as_object().cloned().unwrap_or_default();
    layout::add_reserved(&mut listed, timeout);
    map.insert("inputSchema".into(), Value::Object(listed));
    // The restricted form's sentence says what needs --allow-write: the tool-level
    // sentence that it may write no longer holds for what is listed.
    let description = map
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .replace(WRITE_SENTENCE, "");
    let description = if description.is_empty() {
        shown.sentence.clone()
    } else {
        format!("{description} {}", shown.sentence)
    };
    map.insert("description".into(), json!(description));
    if let Some(annotations) = map.get_mut("annotations").and_then(Value::as_object_mut) {
        annotations.insert("readOnlyHint".into(), json!(true));
        annotations.insert("destructiveHint".into(), json!(false));
    }
}
