"""The validation table (validation/points/*.toml): published measurements, scored by gpuwise."""
