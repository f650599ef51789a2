from predictive_headroom.cli import main

raise SystemExit(main())
