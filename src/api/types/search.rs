//! Where a full-text search matched a session (`SessionEdge.matches`).

use async_graphql::{Context, Enum, Object, SimpleObject};

use super::{TimelineEvent, loaders};
use crate::store::search_words::SearchWords;
use crate::store::{HIGHLIGHT_END, HIGHLIGHT_START, Key, MatchedField, SearchMatchRow};
use async_graphql::Result;

/// The search a session was listed by, carried on its edge.
#[derive(Clone)]
pub struct EdgeSearch {
    pub words: SearchWords,
    pub rank: f32,
}

/// Where a search matched.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
pub enum SearchField {
    /// The session's alert type.
    AlertType,
    /// The session's final analysis.
    FinalAnalysis,
    /// The session's executive summary.
    ExecutiveSummary,
    /// The session's alert data (its JSON text).
    AlertData,
    /// A finished timeline event's text (see `event`).
    TimelineEvent,
}

impl From<MatchedField> for SearchField {
    fn from(field: MatchedField) -> Self {
        match field {
            MatchedField::AlertType => Self::AlertType,
            MatchedField::FinalAnalysis => Self::FinalAnalysis,
            MatchedField::ExecutiveSummary => Self::ExecutiveSummary,
            MatchedField::AlertData => Self::AlertData,
            MatchedField::TimelineEvent => Self::TimelineEvent,
        }
    }
}

/// A stretch of a fragment that matched the search.
#[derive(SimpleObject, Debug, PartialEq, Eq)]
pub struct TextHighlight {
    /// Where it starts in the fragment, in characters (Unicode code points) from 0.
    pub start: i32,
    /// Where it ends in the fragment (exclusive), in characters.
    pub end: i32,
}

pub struct SearchMatch {
    row: SearchMatchRow,
    /// The headline's plain text, and where the words found are in it.
    fragment: String,
    highlights: Vec<TextHighlight>,
}

impl From<SearchMatchRow> for SearchMatch {
    fn from(row: SearchMatchRow) -> Self {
        let (fragment, highlights) = split_headline(&row.headline);
        Self {
            row,
            fragment,
            highlights,
        }
    }
}

/// One place a search matched a session: a field of the session or one of its timeline events,
/// with a fragment of that text around the words found.
#[Object]
impl SearchMatch {
    /// What matched.
    async fn field(&self) -> SearchField {
        self.row.field.into()
    }
    /// The timeline event that matched (when `field` is `TIMELINE_EVENT`).
    async fn event(&self, ctx: &Context<'_>) -> Result<Option<TimelineEvent>> {
        let Some(id) = self.row.event_id else {
            return Ok(None);
        };
        Ok(loaders(ctx)
            .timeline_events
            .load_one(Key::new(self.row.session_id, id))
            .await?
            .map(TimelineEvent))
    }
    /// How well this text matches (PostgreSQL's `ts_rank`, weighted by field).
    async fn rank(&self) -> f32 {
        self.row.rank
    }
    /// Up to two passages of the text around the words found (joined by ` … `), as plain
    /// text: mark it up with `highlights`.
    async fn fragment(&self) -> &str {
        &self.fragment
    }
    /// The stretches of `fragment` that matched, in order.
    async fn highlights(&self) -> &[TextHighlight] {
        &self.highlights
    }
}

/// A headline's plain text, and where its marked words are in it (in characters).
fn split_headline(headline: &str) -> (String, Vec<TextHighlight>) {
    let mut text = String::with_capacity(headline.len());
    let mut highlights = Vec::new();
    let (mut chars, mut start) = (0i32, None);
    for c in headline.chars() {
        match c {
            HIGHLIGHT_START => start = Some(chars),
            HIGHLIGHT_END => {
                if let Some(start) = start.take() {
                    highlights.push(TextHighlight { start, end: chars });
                }
            }
            c => {
                text.push(c);
                chars += 1;
            }
        }
    }
    (text, highlights)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_become_character_ranges_of_the_plain_text() {
        let (text, highlights) = split_headline("le \u{2}pod\u{3} «é» \u{2}crashed\u{3}");
        assert_eq!(text, "le pod «é» crashed");
        assert_eq!(
            highlights,
            vec![
                TextHighlight { start: 3, end: 6 },
                TextHighlight { start: 11, end: 18 }
            ]
        );
    }
}
