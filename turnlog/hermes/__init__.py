"""Migration from and back to a Hermes home (hermes-agent 0.19.0's state.db and routing files)."""
