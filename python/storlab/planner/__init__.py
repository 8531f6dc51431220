"""Planning on top of the stack model: recommending layouts (recommend) and emitting build scripts (scripts)."""
