"""Forecasting: the Prophet forecaster, seasonal naive, burst allowances, the within-hour profile, accuracy."""
