import sys

from streaming.cli import main

sys.exit(main())
