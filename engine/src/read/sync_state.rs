//! The directory sync's bookkeeping.
