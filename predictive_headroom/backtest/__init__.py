"""The backtest: simulated cluster, walk-forward refits, planner replay, results, text and page."""
