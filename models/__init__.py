"""Network specs (TOML) of the papers' networks; see models/README.md."""
