//! The shape every tree shares, below the options that tune it.

/// The number of levels, L0 to L6.
pub const NUM_LEVELS: usize = 7;

/// How a keyspace's compactions shape its tree ([`Options::compaction_style`](crate::Options::compaction_style)).
///
/// Both styles keep every level below L0 one sorted run, with newer data in shallower levels, so
/// a keyspace may change style at any time (`Keyspace::set_options`, or the options of a reopen
/// for a new keyspace): the new style's compactions reshape the tree as they come, and
/// [`Db::compact`](crate::Db::compact) reshapes it at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CompactionStyle {
    /// Each level holds about `level_size_multiplier` times the one above, and a compaction
    /// merges a table of one level into the tables it overlaps in the next: every byte is
    /// rewritten about once per level, and a missing key meets one filter per level.
    #[default]
    Leveled,
    /// Lazy leveling (Dostoevsky, Dayan and Idreos, SIGMOD 2018): every level but the last is
    /// tiered, holding up to `runs_per_level` sorted runs of about the same size that are merged
    /// together once there are that many, into one run of the next level; the last level is one
    /// run, which the runs of the level above are merged into. Each byte is written about once
    /// per tiered level and a few times in the last, at the price of more runs for a Get to ask.
    /// Every level below L0 holds one run; a run is sized by its level, so with seven levels a
    /// tree holds up to six runs below L0 (see DESIGN.md, *Lazy leveling*). `runs_per_level`
    /// below 2 is taken as 2.
    LazyLeveled {
        /// Runs a tiered level holds before they are merged (Dostoevsky's T).
        runs_per_level: usize,
    },
}

impl CompactionStyle {
    /// The runs a tiered level holds before they are merged; `None` under leveled compaction.
    pub fn runs_per_level(&self) -> Option<usize> {
        match *self {
            CompactionStyle::Leveled => None,
            CompactionStyle::LazyLeveled { runs_per_level } => Some(runs_per_level.max(2)),
        }
    }
}

impl std::fmt::Display for CompactionStyle {
    /// `leveled`, or `lazy_leveled:T`: how the keyspace's record names it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.runs_per_level() {
            None => write!(f, "leveled"),
            Some(t) => write!(f, "lazy_leveled:{t}"),
        }
    }
}

impl std::str::FromStr for CompactionStyle {
    type Err = ();

    /// What `Display` writes.
    fn from_str(s: &str) -> Result<Self, ()> {
        match s {
            "leveled" => Ok(CompactionStyle::Leveled),
            _ => {
                let t = s.strip_prefix("lazy_leveled:").ok_or(())?;
                let runs_per_level = t.parse::<usize>().map_err(|_| ())?;
                Ok(CompactionStyle::LazyLeveled { runs_per_level })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_style_reads_back_as_written() {
        for style in [
            CompactionStyle::Leveled,
            CompactionStyle::LazyLeveled { runs_per_level: 4 },
        ] {
            assert_eq!(style.to_string().parse::<CompactionStyle>(), Ok(style));
        }
        assert_eq!(
            CompactionStyle::LazyLeveled { runs_per_level: 0 }.runs_per_level(),
            Some(2)
        );
        assert!("lazy_leveled:x".parse::<CompactionStyle>().is_err());
        assert!("tiered".parse::<CompactionStyle>().is_err());
    }
}
