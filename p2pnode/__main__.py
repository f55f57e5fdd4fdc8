"""``python -m p2pnode`` runs the CLI."""

from p2pnode.cli import main

raise SystemExit(main())
