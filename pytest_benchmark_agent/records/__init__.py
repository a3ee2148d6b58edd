"""What a run writes and reads back: the live run, its folder, fingerprints, tags."""
