"""The user's policy: YAML pool models, loading with located errors, cron parsing, durations, PH_* settings."""
