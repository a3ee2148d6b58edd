"""The tuner: search spaces, rounds and moves that gate 2 supports."""
