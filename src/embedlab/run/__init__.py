"""The run folder as a unit: choosing and restarting it, its lock, signals, status and
provenance (config.json, env.json). Used by `train` and `linreg` alike."""
