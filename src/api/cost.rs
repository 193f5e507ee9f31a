//! What each field costs, for the query cost limit. A unit is one field of one row; lists are
//! priced by the rows they return: a page by its size (at least one row's worth, so a page of
//! zero is not free), an unpaginated list by a realistic bound on its length (the seed's
//! sessions: a handful of stages, a few agents each, a few questions per chat), and a count or
//! roll-up by the SQL it runs. Every figure saturates at [`CAP`], so no query can wrap
//! the sum around and slip under the limit.

/// No field costs more than this: far above any limit, and low enough that async-graphql's
/// unchecked sums over the fields of a document (at most a few million in a body) cannot
/// overflow.
const CAP: usize = 1 << 40;

/// `totalCount`: a count over every row the filter matches (as a field of the connection, it is
/// also multiplied by the page size: the cost of a page covers all of its selection).
pub const COUNT: usize = 100;
/// A roll-up (`tokenUsage`, `counts`): an aggregate over a subtree.
pub const ROLL_UP: usize = 10;

/// A grouping of `sessionStats`: an aggregate over every session the filter matches (a month of
/// them: hundreds of milliseconds of database time), so a dozen fit under the default limit.
pub const GROUPING: usize = 10_000;

/// Groups of a grouping, up to `first`, each costing `child`.
pub fn groups(first: i32, child: usize) -> usize {
    aggregate(GROUPING, list(first.max(0) as usize, child))
}

/// Realistic lengths of the unpaginated lists.
pub mod rows {
    pub const STAGES_PER_SESSION: usize = 10;
    pub const EXECUTIONS_PER_STAGE: usize = 5;
    pub const AGENTS_PER_SESSION: usize = 20;
    pub const SUB_AGENTS: usize = 5;
    pub const QUESTIONS_PER_CHAT: usize = 10;
    pub const STATUS_CHANGES: usize = 10;
    pub const NOTIFICATIONS_PER_SESSION: usize = 5;
    pub const SHARE_LINKS: usize = 5;
}

/// A list of (about) `rows` rows of a selection costing `child` each.
pub fn list(rows: usize, child: usize) -> usize {
    rows.max(1).saturating_mul(child).saturating_add(1).min(CAP)
}

/// A page of `first` or `last` rows (the default page when neither is given; the larger when
/// both are, which the resolver refuses). The page size is capped at the default maximum (cost
/// is computed before the configuration is at hand); a larger one is refused by the resolver
/// with a clearer error.
pub fn page(first: Option<i32>, last: Option<i32>, child: usize) -> usize {
    let cap = super::options::DEFAULT_MAX_PAGE_SIZE as i32;
    let rows = first
        .max(last)
        .unwrap_or(super::pagination::DEFAULT_PAGE_SIZE as i32)
        .clamp(0, cap);
    list(rows as usize, child)
}

/// A field that runs its own aggregate (`cost`) besides its selection.
pub fn aggregate(cost: usize, child: usize) -> usize {
    cost.saturating_add(child).min(CAP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_of_zero_are_not_free_and_nothing_wraps() {
        assert_eq!(page(Some(0), None, 7), 8);
        assert_eq!(page(Some(5), None, 7), 36);
        assert_eq!(page(None, Some(5), 7), 36, "`last` counts like `first`");
        assert_eq!(page(Some(1), Some(5), 7), 36);
        assert_eq!(
            page(None, Some(1_000_000), 7),
            701,
            "capped at the maximum page size"
        );
        assert_eq!(page(None, None, 1), 21);
        assert_eq!(list(usize::MAX, usize::MAX), CAP);
        assert_eq!(aggregate(COUNT, usize::MAX), CAP);
        assert!(
            CAP.checked_mul(60_000).is_some(),
            "many capped fields still add up"
        );
    }
}
