"""``python -m p2plab`` runs the full ``p2pnode`` command."""

from p2plab.cli import main

raise SystemExit(main())
