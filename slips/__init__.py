"""Device keys and signed permission slips (capability records)."""
