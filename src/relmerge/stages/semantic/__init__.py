"""The semantic stage: same fact in other words, languages, directions or type labels."""
