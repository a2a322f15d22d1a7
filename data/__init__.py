"""The embedded default dataset; see data/README.md."""
