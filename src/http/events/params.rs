//! The stream's query parameters: where it starts (`after`, or the `Last-Event-ID` header a
//! reconnecting `EventSource` sends), which events (`categories`, `agents`, `stages`), and
//! whether it starts with the agent tree (`topology`).

use std::collections::HashMap;

use axum::http::HeaderMap;

use crate::api::ids::{NodeType, decode_as, decode_source};
use crate::live::envelope::EventCategory;
use crate::live::events::EventFilter;
use crate::model::from_db_name;

/// What the client asked for.
pub(super) struct Params {
    pub after: i64,
    pub filter: EventFilter,
    pub topology: bool,
}

impl Params {
    /// The parameters, or what is wrong with them (for a 400).
    pub fn of(params: &HashMap<String, String>, headers: &HeaderMap) -> Result<Params, String> {
        Ok(Params {
            after: start_after(params, headers)?,
            filter: filter_of(params)?,
            topology: params
                .get("topology")
                .is_some_and(|v| v == "true" || v == "1"),
        })
    }
}

/// Where the stream starts: after `Last-Event-ID` (a reconnecting `EventSource`), else after
/// `?after=`, else at the start.
fn start_after(params: &HashMap<String, String>, headers: &HeaderMap) -> Result<i64, String> {
    let given = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| params.get("after").cloned());
    match given {
        None => Ok(0),
        Some(text) => match text.trim().parse::<i64>() {
            Ok(n) if n >= 0 => Ok(n),
            _ => Err(format!(
                "`after` (or `Last-Event-ID`) must be a sequence number (0 or more), got {text:?}"
            )),
        },
    }
}

fn filter_of(params: &HashMap<String, String>) -> Result<EventFilter, String> {
    let list = |name: &str| -> Vec<String> {
        params
            .get(name)
            .map(|v| {
                v.split(',')
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    };
    let ids = |name: &str, decode: &dyn Fn(&str) -> crate::error::Result<uuid::Uuid>| {
        list(name)
            .iter()
            .map(|id| decode(id).map_err(|e| format!("`{name}`: {e}")))
            .collect::<Result<_, String>>()
    };
    Ok(EventFilter {
        categories: list("categories")
            .iter()
            .map(|c| {
                from_db_name::<EventCategory>(&c.to_lowercase())
                    .ok_or_else(|| format!("`categories`: {c:?} is not a category"))
            })
            .collect::<Result<_, _>>()?,
        sources: ids("agents", &decode_source)?,
        stages: ids("stages", &|id| decode_as(NodeType::Stage, id))?,
    })
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    #[test]
    fn the_start_comes_from_last_event_id_first() {
        let mut headers = HeaderMap::new();
        let mut params = HashMap::new();
        assert_eq!(start_after(&params, &headers), Ok(0));
        params.insert("after".to_owned(), "7".to_owned());
        assert_eq!(start_after(&params, &headers), Ok(7));
        headers.insert("last-event-id", HeaderValue::from_static("12"));
        assert_eq!(start_after(&params, &headers), Ok(12));
        headers.insert("last-event-id", HeaderValue::from_static("-1"));
        assert!(start_after(&params, &headers).is_err());
    }

    #[test]
    fn categories_are_checked() {
        let params = HashMap::from([("categories".to_owned(), "llm, LIFECYCLE".to_owned())]);
        let filter = filter_of(&params).unwrap();
        assert!(filter.categories.contains(&EventCategory::Llm));
        assert!(filter.categories.contains(&EventCategory::Lifecycle));
        let params = HashMap::from([("categories".to_owned(), "nope".to_owned())]);
        assert!(filter_of(&params).unwrap_err().contains("nope"));
    }
}
