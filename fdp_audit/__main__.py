import sys

from fdp_audit.cli import main

sys.exit(main())
