"""What the daemon's re-tune runs, and the backtest replays: the simulated cluster, the planner minute by minute, walk-forward refits, the promise and its price."""
