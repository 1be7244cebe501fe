//! Property tests of the planner.
