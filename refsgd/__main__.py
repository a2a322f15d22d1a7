from refsgd.cli import main

raise SystemExit(main())
