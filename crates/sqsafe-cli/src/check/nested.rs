//! Nested applications whose template is a local file, inlined into the parent before the rules run: sqsafe-local's
//! [`flatten`](sqsafe_local::stack::flatten), the one the local stack reads templates through. An application left in
//! place (its template in S3 or the Serverless Application Repository) is what rule `nested-application` reports.

use std::path::Path;

use serde_norway::Value;
pub(crate) use sqsafe_local::stack::nested::location;

use super::template::{TemplateError, show};

/// `doc` with every nested application whose template is a local file inlined (`folder`: the parent template's
/// folder, which relative locations start from); see [`sqsafe_local::stack::flatten`].
///
/// # Errors
/// A child template that cannot be read or parsed, a parameter with no value, a child that uses what is not inlined
/// (Conditions, Mappings, Globals), a renamed id that collides, a missing output, a template that nests itself.
pub fn flatten(doc: Value, folder: &Path) -> Result<Value, TemplateError> {
    Ok(sqsafe_local::stack::flatten(doc, folder)?)
}

/// What rule `nested-application` says of an application left in place.
pub(crate) fn not_checked(app: &str, location: &Value) -> String {
    let at = match location {
        Value::String(s) => s.clone(),
        Value::Null => "no location".to_owned(),
        other => show(Some(other)),
    };
    format!("cannot check nested application {app} at {at}: only local template files are read")
}
