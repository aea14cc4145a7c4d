"""``python -m reactor``: the same as the ``reactor`` command."""

from reactor._cli import main

raise SystemExit(main())
