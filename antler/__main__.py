from antler.cli import main

raise SystemExit(main())
