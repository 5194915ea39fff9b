import sys

from fdp_audit.supervision import main

sys.exit(main())
