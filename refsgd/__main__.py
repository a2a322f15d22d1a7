from refsgd.entry import main

raise SystemExit(main())
