"""fedkd_core."""
