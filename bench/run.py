"""Run every benchmark in bench/ one after another and print their tables (`make bench`)."""

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHES = ("reconcile_bench.py", "forecast_bench.py", "backtest_bench.py", "disruption_bench.py")

failed = 0
for name in BENCHES:
    print(f"==== {name}", flush=True)
    failed |= subprocess.call([sys.executable, str(HERE / name)]) != 0
sys.exit(1 if failed else 0)
