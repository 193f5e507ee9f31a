//! The answer made from a tree's records, in the shape of the plan's [`Object`]s: the values
//! the resolvers would make, in the order and under the keys the query gave.

use async_graphql::indexmap::IndexMap;
use async_graphql::{ScalarType as _, Value};

use super::connection::Edge;
use super::fields::Field;
use super::plan::{Object, Output};
use crate::api::ids;
use crate::api::runner::response_size::{ResponseSize, size_of};
use crate::store::tree::{Datum, Level};

/// The object `plan` makes of `record`, a record of `level`.
pub fn object(
    plan: &Object,
    level: &Level,
    record: &[Datum],
    size: &ResponseSize,
) -> Result<Value, String> {
    let mut fields = IndexMap::with_capacity(plan.outputs.len());
    for (key, output) in &plan.outputs {
        let value = match output {
            Output::Typename(name) => Value::String((*name).to_owned()),
            Output::Column { column, field } => {
                let Field::Column { value, counted, .. } = field else {
                    return Err(format!("{key}: not a column"));
                };
                let value =
                    value(datum(record, *column)?).map_err(|err| format!("{key}: {err}"))?;
                if *counted && value != Value::Null {
                    // Past the limit the whole response is replaced (`Runner::finish`): the
                    // rest is not built.
                    size.add(size_of(&value))
                        .map_err(|_| "the response grew too large".to_owned())?;
                }
                value
            }
            Output::GlobalId { column, node } => match datum(record, *column)? {
                Datum::Uuid(id) => ids::encode(*node, *id).to_value(),
                other => return Err(format!("{key}: an id expected, {} read", other.kind())),
            },
            Output::List {
                below,
                object: item,
            } => {
                let (level, rows) = below_of(level, record, *below)?;
                Value::List(
                    rows.iter()
                        .map(|row| object(item, level, row, size))
                        .collect::<Result<_, _>>()?,
                )
            }
            Output::One {
                below,
                object: item,
            } => {
                let (level, rows) = below_of(level, record, *below)?;
                match rows[..] {
                    [] => Value::Null,
                    [row] => object(item, level, row, size)?,
                    _ => return Err(format!("{key}: {} records for one", rows.len())),
                }
            }
            Output::Page { below, connection } => {
                let (level, rows) = below_of(level, record, *below)?;
                let edges: Vec<_> = rows
                    .into_iter()
                    .map(|row| Edge { row, cursor: None })
                    .collect();
                connection.answer(&edges, None, |node, row| object(node, level, row, size))?
            }
        };
        fields.insert(key.clone(), value);
    }
    Ok(Value::Object(fields))
}

fn datum(record: &[Datum], at: usize) -> Result<&Datum, String> {
    record
        .get(at)
        .ok_or_else(|| format!("a record of {} fields has no field {at}", record.len()))
}

/// The level below `level` at `below`, and the records of it under `record`.
fn below_of<'a>(
    level: &'a Level,
    record: &'a [Datum],
    below: usize,
) -> Result<(&'a Level, Vec<&'a [Datum]>), String> {
    let level_below = level
        .below
        .get(below)
        .ok_or_else(|| format!("no level {below} below"))?;
    let Datum::Array(items) = datum(record, level.columns.len() + below)? else {
        return Err(format!("level {below} below is not an array"));
    };
    let rows = items
        .iter()
        .map(|item| match item {
            Datum::Record(fields) => Ok(fields.as_slice()),
            other => Err(format!("a record expected, {} read", other.kind())),
        })
        .collect::<Result<_, _>>()?;
    Ok((level_below, rows))
}
