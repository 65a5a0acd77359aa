//! The shape every tree shares, below the options that tune it.

/// The number of levels, L0 to L6.
pub const NUM_LEVELS: usize = 7;
