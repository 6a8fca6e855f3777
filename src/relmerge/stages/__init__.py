"""Pipeline stages: pure functions and small classes over typed data (no file I/O)."""
