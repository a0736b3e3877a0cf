//! The send queue (work in progress).
