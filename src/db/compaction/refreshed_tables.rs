//! Which tables a filter refresh (`filter_refresh.rs`) wrote since another compaction last
//! changed the tree, kept in the keyspace's `Tree`: provisional ones may be refreshed once more,
//! final ones not again.

use std::collections::HashSet;

/// Table numbers a refresh wrote since another compaction last changed the tree.
#[derive(Debug, Default)]
pub(crate) struct RefreshedTables(parking_lot::Mutex<Refreshed>);

#[derive(Debug, Default)]
struct Refreshed {
    /// Written while other tables still overspent: refreshed again once no other table is due.
    provisional: HashSet<u64>,
    /// Not refreshed again.
    done: HashSet<u64>,
}

/// Whether a refresh may rewrite a table now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refreshable {
    /// Only a table no refresh wrote.
    NotWritten,
    /// A provisional one too.
    Any,
}

impl RefreshedTables {
    /// Forgets them: a compaction changed the tree, and their bits may be due again.
    pub(crate) fn clear(&self) {
        let mut r = self.0.lock();
        r.provisional.clear();
        r.done.clear();
    }

    pub(super) fn skips(&self, number: u64, refreshable: Refreshable) -> bool {
        let r = self.0.lock();
        r.done.contains(&number)
            || refreshable == Refreshable::NotWritten && r.provisional.contains(&number)
    }

    /// Records the tables a refresh wrote: provisional ones (`provisional`: a table no refresh
    /// wrote still overspends), refreshed again once no other is due, or final ones.
    pub(super) fn record(&self, written: Vec<u64>, provisional: bool) {
        let mut r = self.0.lock();
        for number in written {
            if provisional {
                r.provisional.insert(number);
            } else {
                r.provisional.remove(&number);
                r.done.insert(number);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provisional_tables_wait_for_the_others_and_final_ones_until_the_tree_changes() {
        let r = RefreshedTables::default();
        r.0.lock().provisional.insert(1);
        r.0.lock().done.insert(2);
        assert!(r.skips(1, Refreshable::NotWritten));
        assert!(!r.skips(1, Refreshable::Any));
        assert!(r.skips(2, Refreshable::NotWritten));
        assert!(r.skips(2, Refreshable::Any));
        assert!(!r.skips(3, Refreshable::NotWritten));
        r.clear();
        assert!(!r.skips(1, Refreshable::NotWritten));
        assert!(!r.skips(2, Refreshable::Any));
    }
}
