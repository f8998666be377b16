"""player package."""
