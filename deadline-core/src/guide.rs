//! The guide: placeholder, written below.
