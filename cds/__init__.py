"""cds package."""
