//! Memory-ordering primitives for device access, named by intent (filled in by the barrier work).
